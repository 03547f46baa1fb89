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
    case "crash-writer":
        try Scale.crashWriter(path: arguments[1])
    default:
        let options = try Options(arguments)
        let results = try Run.all(options)
        let report = Report(results, plan: options.plan, analysisPath: options.analysis)
        let markdown = report.markdown()
        print(markdown)
        if let output = options.output {
            try markdown.write(toFile: output, atomically: true, encoding: .utf8)
            try JSONEncoder().encode(results).write(to: URL(fileURLWithPath: options.directory + ".json"))
        }
        if let chart = options.chart { try report.drawChart(to: chart, scratch: options.directory + "-chart") }
    }
} catch {
    FileHandle.standardError.write(Data("larder-bench: \(error)\n".utf8))
    exit(1)
}
