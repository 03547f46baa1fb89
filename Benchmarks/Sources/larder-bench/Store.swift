import CPeers
import Foundation
import Larder

/// The stores measured: Larder through its Swift API, and every peer of `CPeers` (Larder's C ABI
/// among them).
enum PeerKind: String, CaseIterable, Codable, Sendable {
    case memhash
    case larderSwift = "larder-swift"
    /// The Swift API reading through `withValue` (lent bytes, copied by the loop) instead of
    /// `copyValue(forKey:into:)`.
    case larderSwiftLend = "larder-swift-lend"
    case larderC = "larder-c"
    case tkrzw, lmdb, sqlite, files
    /// A prototype of a slimmer record (CPeers/peer_slim_record.c): measured on request, never
    /// in the default run.
    case slimRecord = "slim-record"

    var title: String {
        switch self {
        case .memhash: "C hash table (memory)"
        case .larderSwift: "Larder (Swift API)"
        case .larderSwiftLend: "Larder (Swift, withValue)"
        case .larderC: "Larder (C ABI)"
        case .tkrzw: "tkrzw HashDBM"
        case .lmdb: "LMDB"
        case .sqlite: "SQLite"
        case .files: "file per key"
        case .slimRecord: "slim record (prototype)"
        }
    }

    /// The C peer; nil for Larder's Swift API.
    var cPeer: UnsafePointer<bench_peer>? {
        isSwift ? nil : bench_peer_named(rawValue)
    }

    var isSwift: Bool { self == .larderSwift || self == .larderSwiftLend }
    var isLarder: Bool { isSwift || self == .larderC }

    /// Whether threads share one handle (otherwise each opens its own).
    var sharedHandle: Bool { cPeer.map { $0.pointee.shared_handle != 0 } ?? true }
    /// Whether several processes can read the store at once.
    var multiProcess: Bool { cPeer.map { $0.pointee.multi_process != 0 } ?? true }
    /// Whether processes can read while another process writes.
    var multiProcessWriter: Bool { cPeer.map { $0.pointee.multi_process_writer != 0 } ?? true }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// How a store is sized for a run.
struct StoreSizing: Codable, Sendable {
    var keys: Int
    var dataBytes: Int

    /// Larder's capacity: room for every record (header, key, value, alignment), the index, and
    /// the dead records that updates leave until the tail comes round, so that the main table
    /// never evicts.
    var larderCapacity: Int {
        let recordBytes = dataBytes + keys * 64
        return max(recordBytes * 3 + keys * 32, 8 << 20)
    }
}

/// One open store.
final class Store: @unchecked Sendable {
    let kind: PeerKind
    let directory: String
    private(set) var handle: UnsafeMutableRawPointer?
    private(set) var cache: Cache?

    static func larderPath(in directory: String) -> String { directory + "/cache.larder" }

    /// Whether the store has calls on many keys at once (`runBatchedGets` and its siblings).
    var hasBatches: Bool { kind == .larderC || kind == .larderSwift }

    init(_ kind: PeerKind, directory: String, sizing: StoreSizing, readOnly: Bool = false) throws {
        self.kind = kind
        self.directory = directory
        if let peer = kind.cPeer {
            var config = bench_config(dir: nil, expected_keys: UInt64(sizing.keys), expected_bytes: UInt64(sizing.dataBytes),
                                      capacity_bytes: UInt64(sizing.larderCapacity), read_only: readOnly ? 1 : 0)
            handle = directory.withCString { dir in
                config.dir = dir
                return peer.pointee.open(&config)
            }
            guard handle != nil else { throw BenchFailure("\(kind.rawValue): \(String(cString: bench_last_error()))") }
        } else {
            do {
                cache = try Cache(path: Self.larderPath(in: directory),
                                  options: .init(capacity: readOnly ? nil : .bytes(sizing.larderCapacity), readOnly: readOnly))
            } catch {
                throw BenchFailure("larder-swift: \(error)")
            }
        }
    }

    /// A store around a cache opened elsewhere (with options of its own).
    init(wrapping cache: Cache, directory: String) {
        kind = .larderSwift
        self.directory = directory
        self.cache = cache
    }

    /// Runs `ops` with the loop of this store's kind: the C loop, or its Swift mirror.
    func run(_ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>, maxSeconds: Double,
             sampleEvery: Int, samples: UnsafeMutableBufferPointer<UInt64>,
             buffer: UnsafeMutableRawBufferPointer) -> bench_result {
        let maxNs = UInt64(maxSeconds * 1e9)
        var result = bench_result()
        if let peer = kind.cPeer {
            var cData = data.cData
            bench_run_ops(peer, handle, &cData, ops.baseAddress, ops.count, maxNs, sampleEvery,
                          samples.baseAddress, buffer.baseAddress, &result)
        } else {
            result = SwiftLoop.run(cache!, data, ops, lend: kind == .larderSwiftLend, maxNs: maxNs,
                                   sampleEvery: sampleEvery, samples: samples, buffer: buffer)
        }
        return result
    }

    /// Writes the keys of `ops` over through Larder's batched write, `BENCH_BATCH` keys a call;
    /// nil for stores that have none.
    func runBatchedPuts(_ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>, maxSeconds: Double) -> bench_result? {
        let maxNs = UInt64(maxSeconds * 1e9)
        var result = bench_result()
        switch kind {
        case .larderC:
            var cData = data.cData
            bench_larder_c_batched_puts(handle, &cData, ops.baseAddress, ops.count, maxNs, &result)
        case .larderSwift:
            result = SwiftLoop.runBatchedPuts(cache!, data, ops, maxNs: maxNs)
        default:
            return nil
        }
        return result
    }

    /// Removes the keys of `ops` through Larder's batched removal, `BENCH_BATCH` keys a call;
    /// nil for stores that have none.
    func runBatchedDeletes(_ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>) -> bench_result? {
        var result = bench_result()
        switch kind {
        case .larderC:
            var cData = data.cData
            bench_larder_c_batched_deletes(handle, &cData, ops.baseAddress, ops.count, &result)
        case .larderSwift:
            result = SwiftLoop.runBatchedDeletes(cache!, data, ops)
        default:
            return nil
        }
        return result
    }

    /// Runs the gets of `ops` through Larder's batched read, `BENCH_BATCH` keys a call, into
    /// `buffers` (`BENCH_BATCH` values one after another); nil for stores that have none.
    func runBatchedGets(_ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>, maxSeconds: Double,
                        buffers: UnsafeMutableRawBufferPointer) -> bench_result? {
        let maxNs = UInt64(maxSeconds * 1e9)
        var result = bench_result()
        switch kind {
        case .larderC:
            var cData = data.cData
            bench_larder_c_batched_gets(handle, &cData, ops.baseAddress, ops.count, maxNs, buffers.baseAddress, &result)
        case .larderSwift:
            result = SwiftLoop.runBatchedGets(cache!, data, ops, maxNs: maxNs, buffers: buffers)
        default:
            return nil
        }
        return result
    }

    /// A worker thread is done with this store (LMDB releases its reader slot).
    func threadDone() {
        if let peer = kind.cPeer, let done = peer.pointee.thread_done { done(handle) }
    }

    func close() {
        if let peer = kind.cPeer, let handle {
            peer.pointee.close(handle)
        }
        handle = nil
        try? cache?.close()
        cache = nil
    }

    deinit { close() }
}
