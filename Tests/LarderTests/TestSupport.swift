import Foundation
import Testing
@testable import Larder

/// A fresh directory per test, removed afterwards.
final class TemporaryDirectory {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("larder-tests-\(UUID().uuidString)", isDirectory: true)
        try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ name: String = "cache.larder") -> String {
        url.appendingPathComponent(name).path
    }
}

/// Deterministic bytes for a key and a length, so a test can check any value it reads back.
func pattern(_ seed: Int, count: Int) -> [UInt8] {
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

/// A small deterministic generator for tests.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A value of `length` bytes (at least 8) that names its key and version in its first 8 bytes,
/// so that a test can tell which version of which key it read back.
func versionedBytes(key: Int, version: Int, length: Int) -> [UInt8] {
    var bytes = pattern(key &* 1_000_003 &+ version, count: max(length, 8))
    withUnsafeBytes(of: (UInt32(key), UInt32(version))) { bytes.replaceSubrange(0..<8, with: $0) }
    return bytes
}

extension Cache {
    /// Opens with a capacity in bytes and an optional page size: the common case in tests.
    convenience init(at path: String, capacity: Int? = nil, pageSize: Int = 4096,
                     expiry: Expiry = .never, readOnly: Bool = false) throws {
        try self.init(path: path, options: .init(capacity: capacity.map { .bytes($0) }, pageSize: pageSize,
                                                defaultExpiry: expiry, readOnly: readOnly))
    }
}

/// Runs `body(0)`, `body(1)`, ... each on a thread of its own, all at once, and waits for them:
/// unlike `concurrentPerform`, which may run the iterations one after another on a busy machine,
/// so that a reader waiting for a writer would wait forever. The wait blocks: only a test that
/// runs on threads of its own may call it (`WaitingTestTrait`).
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    expectOwnThreads()
    let finished = DispatchSemaphore(value: 0)
    for index in 0..<count {
        Thread {
            body(index)
            finished.signal()
        }.start()
    }
    for _ in 0..<count { finished.wait() }
}

/// Runs `body` on a thread of its own and waits for it without holding a thread of Swift's shared
/// pool, which a test that reads or writes without pause would otherwise keep from other tests
/// (and then wait for, in its turn, whenever it yields).
func onOwnThread<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        // The thread is the caller's own: a blocking helper may run on it (`expectOwnThreads`).
        Thread {
            continuation.resume(with: Swift.Result { try WaitingTestTrait.$isOnOwnThreads.withValue(true, operation: body) })
        }.start()
    }
}

/// Waits until `condition` holds or `seconds` have passed, looking every `interval`, without
/// holding a thread (the caller then checks the condition itself, to fail with its own words).
func waitUntil(seconds: Double, every interval: Duration = .milliseconds(10),
               _ condition: () throws -> Bool) async throws {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while try !condition() && Date() < deadline { try await Task.sleep(for: interval) }
}

/// Waits until `count` requests for locks on the file at `path` are blocked, as Linux's
/// /proc/locks lists them, or `seconds` have passed: for a test that must know that threads wait
/// for a lock before it goes on. Elsewhere, waits a moment instead. It blocks: call it on a
/// thread of the test's own (`WaitingTestTrait`, `runOnThreads`).
func waitForBlockedLockRequests(on path: String, count: Int, seconds: Double = 600) {
    #if os(Linux)
    var status = stat()
    guard stat(path, &status) == 0 else { return }
    // A blocked request: "5: -> OFDLCK ADVISORY WRITE -1 fe:00:16225331 0 0".
    let file = ":\(status.st_ino)"
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        let table = (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
        let blocked = table.split(separator: "\n").count { line in
            let fields = line.split(separator: " ")
            return fields.count > 6 && fields[1] == "->" && fields[6].hasSuffix(file)
        }
        if blocked >= count { return }
        usleep(1000)
    }
    #else
    Thread.sleep(forTimeInterval: 0.3)
    #endif
}

/// The CPU time this thread has used, in seconds: the work a synchronous test did, whatever
/// else the machine ran meanwhile.
func threadCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

extension Trait where Self == ConditionTrait {
    /// For a test that runs a process out of memory (an address-space limit): AddressSanitizer's
    /// allocator, which `scripts/test-asan` runs every test under, then reports and ends the
    /// process instead of returning NULL as `malloc` does.
    static var needsPlainMalloc: Self {
        .disabled(if: ProcessInfo.processInfo.environment["ASAN_OPTIONS"] != nil
                      || dlsym(dlopen(nil, RTLD_NOW), "__asan_init") != nil,
                  "AddressSanitizer's allocator ends a process that runs out of memory")
    }
}

/// An actor whose jobs run on a dispatch queue of its own, so that a test can tell whether code
/// ran on it: the caller's actor, for the `async` overloads that must not run there.
actor QueueActor {
    final class Executor: SerialExecutor {
        static let marker = DispatchSpecificKey<Bool>()
        let queue = DispatchQueue(label: "QueueActor")

        init() { queue.setSpecific(key: Self.marker, value: true) }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }
    }

    private nonisolated let executor = Executor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Whether the calling code runs on some `QueueActor`.
    static var isRunning: Bool { DispatchQueue.getSpecific(key: Executor.marker) == true }

    /// Runs `body` on this actor (isolated to it through its parameter).
    func run<R: Sendable>(_ body: @Sendable (isolated QueueActor) async throws(LarderError) -> R) async throws(LarderError) -> R {
        precondition(Self.isRunning)
        return try await body(self)
    }
}

/// A collection that counts its elements' reads, and those made on a `QueueActor`.
struct WatchedCollection<Element: Sendable>: Collection, Sendable {
    let elements: [Element]
    let reads = LockedCounter(), readsOnTheActor = LockedCounter()

    init(_ elements: [Element]) { self.elements = elements }

    var startIndex: Int { elements.startIndex }
    var endIndex: Int { elements.endIndex }
    func index(after index: Int) -> Int { index + 1 }
    subscript(index: Int) -> Element {
        reads.increment()
        if QueueActor.isRunning { readsOnTheActor.increment() }
        return elements[index]
    }
}

/// Whether these tests run under AddressSanitizer (as `scripts/test-asan` runs them):
/// its runtime is then linked into the test program, and its shadow memory takes page faults of
/// its own whenever the program first touches memory it describes.
let isUnderAddressSanitizer: Bool = {
    guard let program = dlopen(nil, RTLD_NOW) else { return false }
    defer { dlclose(program) }
    return dlsym(program, "__asan_init") != nil
}()

/// Lets this process write no file past `bytes` (a full disk, as `setrlimit(RLIMIT_FSIZE)` makes
/// one), with writes past it failing with `EFBIG` instead of a signal. For exit tests' children.
func limitFileSize(to bytes: Int) -> Bool {
    signal(SIGXFSZ, SIG_IGN)
    var limit = rlimit(rlim_cur: rlim_t(bytes), rlim_max: rlim_t(bytes))
    #if canImport(Glibc)
    let resource = Int32(RLIMIT_FSIZE.rawValue)
    #else
    let resource = RLIMIT_FSIZE
    #endif
    return setrlimit(resource, &limit) == 0
}

/// The code of the `LarderError` that `body` throws, or nil when it throws nothing (another error
/// fails the test).
func errorCode(_ body: () throws -> Void) -> LarderError.Code? {
    do {
        try body()
        return nil
    } catch let error as LarderError {
        return error.code
    } catch {
        Issue.record(error, "not a LarderError")
        return nil
    }
}

/// Opens the cache at `path` read-only and uses it every way a reader can: hits and misses,
/// lent values, copies into a buffer too small, batches, listings, statistics, writes it refuses;
/// then closes it. Returns the values of `keys` it found (lent and copied alike).
func readEverythingReadOnly(path: String, keys: [String]) throws -> [String: [UInt8]] {
    let reader = try Cache(path: path, options: .init(readOnly: true))
    var found: [String: [UInt8]] = [:]
    for key in keys {
        let copied = try reader.bytes(forKey: key)
        #expect(try reader.withValue(forKey: key) { Array($0) } == copied, "\(key)")
        var tooSmall = [UInt8](repeating: 0, count: 1)
        _ = try tooSmall.withUnsafeMutableBytes { try reader.copyValue(forKey: key, into: $0) }
        #expect(reader.contains(key) == (copied != nil), "\(key)")
        if let copied { found[key] = copied }
    }
    #expect(try reader.bytes(forKey: "never-written") == nil)
    #expect(try reader.withValue(forKey: "never-written") { $0.count } == nil)
    let batch = try reader.data(forKeys: keys + ["never-written"])
    #expect(batch.map { $0.map { [UInt8]($0) } } == keys.map { found[$0] } + [nil])
    var listed = 0
    try reader.forEachEntry { _, _ in
        listed += 1
        return true
    }
    #expect(try reader.keys.count == listed)
    _ = try reader.keys(withPrefix: "k1")
    // The count includes expired entries not yet reclaimed, which listings skip.
    _ = (reader.count, reader.stats, reader.totalBytes, reader.fileBytes)
    #expect(errorCode { try reader.set([1], forKey: "k1") } == .readOnly)
    #expect(errorCode { _ = try reader.removeValue(forKey: "k1") } == .readOnly)
    #expect(errorCode { _ = try reader.trim(toCount: 0) } == .readOnly)
    try reader.sync()
    try reader.close()
    return found
}

/// Where `after` first differs from `before`, in words, for a failure message.
func firstChange(from before: Data, to after: Data) -> String {
    let (old, new) = ([UInt8](before), [UInt8](after))
    guard let offset = zip(old, new).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset else {
        return "the length changed from \(old.count) to \(new.count)"
    }
    return "byte \(offset) changed from \(old[offset]) to \(new[offset])"
}

/// Copies `source` to `destination` as `cp --sparse=always` does: blocks of zeros are left as
/// holes. Returns whether the copy has a hole (the file system may not make any).
func copySparse(_ source: String, to destination: String, blockSize: Int = 4096) throws -> Bool {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
    let descriptor = open(destination, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    #expect(descriptor >= 0)
    defer { close(descriptor) }
    for start in stride(from: 0, to: bytes.count, by: blockSize) {
        let block = bytes[start..<min(start + blockSize, bytes.count)]
        guard block.contains(where: { $0 != 0 }) else { continue }
        let written = block.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(start)) }
        #expect(written == block.count)
    }
    #expect(ftruncate(descriptor, off_t(bytes.count)) == 0)
    return unreservedBytes(in: destination) > 0
}

/// How many of the file's bytes have no disk block reserved (holes), by its size and blocks.
func unreservedBytes(in path: String) -> Int {
    var status = stat()
    #expect(stat(path, &status) == 0)
    return max(0, Int(status.st_size) - Int(status.st_blocks) * 512)
}

#if os(Linux)
/// How many of this process's descriptors name `path`'s file.
func openDescriptors(of path: String) -> Int {
    var target = stat()
    guard stat(path, &target) == 0, let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else {
        return -1
    }
    return names.filter { name in
        var info = stat()
        return stat("/proc/self/fd/\(name)", &info) == 0 && info.st_dev == target.st_dev && info.st_ino == target.st_ino
    }.count
}
#endif
