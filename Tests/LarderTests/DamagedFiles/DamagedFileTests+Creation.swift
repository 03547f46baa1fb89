import Foundation
import Testing
@_spi(Inspection) @testable import Larder

/// Creations cut short, and files of zeros that no creation made.
extension DamagedFileTests {
    /// A file of at most 128 zero bytes holds nothing to lose: the marker's write cut short by a
    /// power cut that kept the file's new length, not its bytes.
    @Test(arguments: [0, 1, 127, 128])
    func aShortFileOfZerosIsAnUnfinishedCreation(length: Int) throws {
        let directory = TemporaryDirectory()
        try Data(count: length).write(to: URL(fileURLWithPath: directory.path()))
        try Cache(path: directory.path()).set([1], forKey: "a")
        #expect(try Cache(path: directory.path()).bytes(forKey: "a") == [1])
    }

    @Test func aCreationThatNeverFinishedIsStartedOver() throws {
        // The creator marked the file and extended it, then died before the meta pages.
        let directory = TemporaryDirectory()
        try Data(FileLayout.creationMarker + [UInt8](repeating: 0, count: 64 * 1024 - 128))
            .write(to: URL(fileURLWithPath: directory.path()))
        #expect(throws: LarderError.self) { try FileInspector(path: directory.path()) }
        #expect { try Cache(path: directory.path(), options: .init(readOnly: true)) } throws: { error in
            (error as? LarderError)?.code == .incompatible
        }
        let cache = try Cache(path: directory.path())
        try cache.set([1], forKey: "a")
        try cache.close()
        #expect(try Cache(path: directory.path()).bytes(forKey: "a") == [1])
    }

    /// A creation that fails once the file is marked (here the file may not grow: a file size
    /// limit) leaves the marker, and the next open creates the file anew.
    @Test(.failsIfItHangs) func aCreationCutShortLeavesItsMarker() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path()
        await #expect(processExitsWith: .success) { [path = path as String] in
            signal(SIGXFSZ, SIG_IGN)
            var limit = rlimit(rlim_cur: 64 * 1024, rlim_max: 64 * 1024)
            setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
            guard (try? Cache(path: path)) == nil else { exit(1) }
            let first = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)).prefix(128))
            exit(first == FileLayout.creationMarker ? 0 : 2)
        }
        #expect { try FileInspector(path: path) } throws: { error in
            (error as? LarderError)?.message.contains("creation did not finish") == true
        }
        try Cache(path: path).set([1], forKey: "a")
        #expect(try Cache(path: path).bytes(forKey: "a") == [1])
    }

    /// Only an empty file or one a creation marked is formatted: a file of zeros at the path (a
    /// disk image, a sparse file, a typo) is not a cache whose creation was cut short, and stays
    /// as it was.
    @Test(arguments: [Array(repeating: UInt8(0), count: 64 * 1024), Array(repeating: 0, count: 129),
                      Array(repeating: 0, count: 200) + Array("important".utf8), Array(repeating: 0, count: 100) + [1]])
    func aFileThatStartsWithZerosIsNotFormatted(contents: [UInt8]) throws {
        let directory = TemporaryDirectory()
        try Data(contents).write(to: URL(fileURLWithPath: directory.path()))
        #expect { try Cache(path: directory.path()) } throws: { error in
            (error as? LarderError)?.code == .incompatible
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.path()))) == contents)
    }
}
