import Foundation
import Testing
import larder_fuzz

/// Every file of the fuzz corpus (hand-made damage, and inputs the fuzzer once crashed on) goes
/// through the fuzz target's operations in the ordinary test run too.
@Suite("Fuzz corpus")
struct FuzzCorpusTests {
    static var corpus: [URL] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus").standardized
        return ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test func theCorpusIsThere() {
        #expect(Self.corpus.count >= 12)
    }

    @Test(arguments: corpus)
    func openingReadingAndWritingADamagedFileNeverCrashes(file: URL) throws {
        let bytes = try [UInt8](Data(contentsOf: file))
        #expect(bytes.withUnsafeBufferPointer { fuzzOneInput($0.baseAddress!, $0.count) } == 0)
    }
}
