import Foundation
import Testing
@testable import Larder

#if os(Linux)
/// A value is as long as its writer made it (up to 4 GiB), and a damaged file can claim any
/// length its checks allow: a read that needs more memory than the process can get must fail
/// with `.noMemory`, as a C program's `malloc` would, and lose nothing.
@Suite("Running out of memory")
struct OutOfMemoryTests {
    /// The address space is limited (Linux's `RLIMIT_AS`) to 32 MiB more than the child uses
    /// once it has opened the caches; a 64 MiB value, stored as it is and compressed, can then be
    /// copied out of neither. Lending the raw one needs no memory; small values, writes and, once
    /// the limit is lifted, the large values themselves are all as they were.
    @Test(.failsIfItHangs, .needsPlainMalloc) func aValueTheProcessHasNoMemoryForIsAnErrorNotACrash() async throws {
        let directory = TemporaryDirectory()
        await #expect(processExitsWith: .success) { [path = directory.path() as String] in
            let large = [UInt8](repeating: 7, count: 64 << 20)
            let raw = try Cache(path: path + "-raw", options: .init(capacity: .megabytes(256)))
            let compressed = try Cache(path: path + "-lz4", options: .init(capacity: .megabytes(256), compression: .lz4))
            for cache in [raw, compressed] {
                try cache.set(large, forKey: "large")
                try cache.set([1, 2, 3], forKey: "small")
            }
            guard try compressed.withValue(forKey: "large", { _ in true }) == true,
                  compressed.stats.storedBytes < 1 << 20 else { exit(10) }

            func isNoMemory(_ read: () throws -> Any?) -> Bool {
                do {
                    _ = try read()
                    return false
                } catch {
                    return (error as? LarderError)?.code == .noMemory
                }
            }
            let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
            let used = Int(statm.split(separator: " ")[0])! * Int(sysconf(Int32(_SC_PAGESIZE)))
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_AS.rawValue), &limit)
            let unlimited = limit
            limit.rlim_cur = rlim_t(used + (32 << 20))
            guard setrlimit(Int32(RLIMIT_AS.rawValue), &limit) == 0 else { exit(11) }

            guard isNoMemory({ try raw.data(forKey: "large") }) else { exit(12) }
            guard isNoMemory({ try compressed.data(forKey: "large") }) else { exit(13) }
            guard isNoMemory({ try compressed.withValue(forKey: "large") { $0.count } }) else { exit(14) }
            guard isNoMemory({ try raw.data(forKeys: ["small", "large"]) }) else { exit(15) }
            guard isNoMemory({ try raw.withValues(forKeys: ["small", "large"]) { _, _ in } }) else { exit(16) }
            guard try raw.withValue(forKey: "large", { $0.count }) == large.count else { exit(17) }
            for cache in [raw, compressed] {
                guard try cache.data(forKey: "small") == Data([1, 2, 3]) else { exit(18) }
                try cache.set([4], forKey: "written")
            }

            var lifted = unlimited
            guard setrlimit(Int32(RLIMIT_AS.rawValue), &lifted) == 0 else { exit(19) }
            for cache in [raw, compressed] {
                guard try cache.data(forKey: "large") == Data(large),
                      try cache.bytes(forKey: "written") == [4] else { exit(20) }
            }
            exit(0)
        }
    }
}
#endif
