import Foundation
import Testing

/// What the tool does when its standard streams or arguments are not what a terminal gives it:
/// output that cannot be written is a failure, and never lands in the cache file.
@Suite(.waitsOnItsOwnThreads) struct StandardStreamsTests {
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/full")))
    func outputThatCannotBeWrittenIsAFailure() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", path, "k", "-"], input: Data(repeating: 7, count: 100_000))
        let full = try Larder.shell(#""$0" get "$1" k >/dev/full"#, [path])
        #expect(full.status == 2)
        #expect(full.stderr.contains("cannot write the output"), "\(full.stderr)")
    }

    /// Started with descriptor 1 closed, the tool opens the cache file under another number: a
    /// command's report (`removed N entries`) once went into the file, over its first meta page.
    @Test func aClosedStandardOutputIsAFailureAndLeavesTheFileIntact() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        for key in ["a", "b", "c"] { try Larder.expect(["put", path, key, "-"], input: Data(key.utf8)) }
        let before = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(128)
        let clear = try Larder.shell(#""$0" clear "$1" >&-"#, [path])
        #expect(clear.status == 2, "\(clear.stderr)")
        #expect(clear.stderr.contains("standard output") || clear.stderr.contains("Bad file descriptor"), "\(clear.stderr)")
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after.prefix(8) == before.prefix(8), "the first meta copy's magic")
        try Larder.expect(["verify", path])
        try Larder.expect(["get", path, "a"], status: 1)
        // A command that prints nothing does not need its standard output.
        try #expect(Larder.shell(#""$0" put "$1" d - >&- </dev/null"#, [path]).status == 0)
        try Larder.expect(["get", path, "d"], stdout: "")
    }

    /// Bytes that are not UTF-8 would reach the command replaced by U+FFFD: another key.
    @Test func anArgumentThatIsNotUTF8IsAUsageError() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        let run = try Larder.shell(#""$0" put "$1" "$(printf 'caf\351')" - </dev/null"#, [path])
        #expect(run.status == 64)
        #expect(run.stderr.contains("--hex-key"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func anUnreadableStandardInputIsAFailureNotACrash() throws {
        let directory = TemporaryDirectory()
        let run = try Larder.shell(#""$0" put "$1" k - </"#, [directory.path()])
        #expect(run.status == 2)
        #expect(run.stderr.contains("cannot read the value"), "\(run.stderr)")
    }

    @Test func recoverRefusesFileItselfUnderAnotherName() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", path, "k", "-"], input: Data("v".utf8))
        let link = directory.path("link.larder")
        try FileManager.default.linkItem(atPath: path, toPath: link)
        for other in [link, directory.url.appendingPathComponent("./cache.larder").path] {
            let run = try Larder.expect(["recover", "--force", path, other], status: 2)
            #expect(run.stderr.contains("the file being read"), "\(run.stderr)")
        }
        try Larder.expect(["get", path, "k"], stdout: "v")
    }

    /// An error message that cannot be written (standard error closed, or a full disk) stopped
    /// the tool with a trap, before `put --capacity` on an existing file had stored its value
    /// (the notice that the capacity stays was the message).
    @Test func aStandardErrorThatCannotBeWrittenLosesTheMessageNotTheCommand() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", path, "k", "-"], input: Data("v".utf8))
        try #expect(Larder.shell(#""$0" get "$1" missing 2>&-"#, [path]).status == 1)
        try #expect(Larder.shell(#"printf new | "$0" put --capacity 2M "$1" n - 2>&-"#, [path]).status == 0)
        try Larder.expect(["get", path, "n"], stdout: "new")
    }

    /// `recover` renames its new file over OUT: over a pipe or a device (as root, /dev/null) that
    /// replaced it with a regular file.
    @Test func recoverRefusesToReplaceWhatIsNotARegularFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        try Larder.expect(["put", path, "k", "-"], input: Data("v".utf8))
        let pipe = directory.path("pipe")
        #expect(mkfifo(pipe, 0o600) == 0)
        let run = try Larder.expect(["recover", "--force", path, pipe], status: 2)
        #expect(run.stderr.contains("not a regular file"), "\(run.stderr)")
        var info = stat()
        #expect(stat(pipe, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
    }
}
