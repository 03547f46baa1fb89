import Foundation

// larder-bench: without a subcommand, the whole benchmark (see Options.usage). The subcommands are
// the child processes it starts itself.
func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
    try JSONDecoder().decode(T.self, from: Data(json.utf8))
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    switch arguments.first {
    case "suite":
        try Child.reply(try Suite.run(try decode(SuiteParameters.self, arguments[1])))
    case "threads":
        try Child.reply(try Concurrency.runThreads(try decode(ConcurrencyParameters.self, arguments[1])))
    case "reader":
        try Child.reply(try Concurrency.runReader(try decode(ConcurrencyParameters.self, arguments[1])))
    case "sweep-step":
        guard arguments.count >= 2 else { throw BenchFailure("sweep-step DIRECTORY [KEYS]") }
        try SweepBench.run(directory: arguments[1], keys: arguments.count > 2 ? Int(arguments[2]) ?? 200_000 : 200_000)
    case "alternate":
        try Alternate.run(Array(arguments.dropFirst()))
    case "watch-latency":
        guard arguments.count >= 2 else { throw BenchFailure("watch-latency DIRECTORY [WRITES]") }
        try WatchBench.printRows(directory: arguments[1], writes: arguments.count > 2 ? Int(arguments[2]) ?? WatchBench.writes : WatchBench.writes)
    case "typed-profile":
        try TypedBench.profile(Array(arguments.dropFirst()))
    case "crash-writer":
        try Scale.crashWriter(path: arguments[1])
    case "report":
        guard arguments.count >= 2 else { throw BenchFailure(Options.usage) }
        let options = try Options(Array(arguments.dropFirst(2)))
        let decoder = JSONDecoder()
        let results = try decoder.decode(RunResults.self, from: Data(contentsOf: URL(fileURLWithPath: arguments[1])))
        try publish(results, options)
    default:
        let options = try Options(arguments)
        let results = try Run.all(options)
        if options.output != nil {
            try JSONEncoder().encode(results).write(to: URL(fileURLWithPath: options.directory + ".json"))
        }
        try publish(results, options)
    }
} catch {
    FileHandle.standardError.write(Data("larder-bench: \(error)\n".utf8))
    exit(1)
}

/// Prints the report, and writes it and the chart where the options say.
func publish(_ results: RunResults, _ options: Options) throws {
    let report = Report(results, analysisPath: options.analysis, chartLink: options.chartLink)
    let markdown = report.markdown()
    print(markdown)
    if let output = options.output { try markdown.write(toFile: output, atomically: true, encoding: .utf8) }
    if let chart = options.chart { try report.drawChart(to: chart, scratch: options.directory + "-chart") }
}
