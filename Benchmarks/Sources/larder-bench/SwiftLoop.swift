import CPeers
import Larder

/// The loop that measures Larder's Swift API: a line-by-line mirror of `bench_run_ops` in
/// Sources/CPeers/loop.c (change one, change the other). A get copies the value into the
/// caller's buffer with `copyValue(forKey:into:)`, the counterpart of `larder_get`; with `lend`,
/// it borrows the value with `withValue` and copies it from there.
enum SwiftLoop {
    @inline(__always)
    static func oneOp(_ cache: Cache, _ data: Dataset, _ op: UInt32, _ lend: Bool, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
        let index = Int(op & Op.indexMask)
        let key = data.key(index)
        switch op >> Op.shift {
        case UInt32(BENCH_OP_GET) where !lend:
            do {
                guard let length = try cache.copyValue(forKey: key, into: buffer) else { return 0 }
                return length == data.valueLength ? 1 : -1
            } catch {
                return -1
            }
        case UInt32(BENCH_OP_GET):
            let capacity = data.valueLength
            do {
                let length = try cache.withValue(forKey: key) { bytes -> Int in
                    if bytes.count <= capacity { buffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                    return bytes.count
                }
                guard let length else { return 0 }
                return length == data.valueLength ? 1 : -1
            } catch {
                return -1
            }
        case UInt32(BENCH_OP_PUT):
            do {
                try cache.set(data.value(index), forKey: key)
                return 1
            } catch {
                return -1
            }
        default:
            do {
                return try cache.removeValue(forKey: key) ? 1 : 0
            } catch {
                return -1
            }
        }
    }

    static func run(_ cache: Cache, _ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>, lend: Bool = false, maxNs: UInt64,
                    sampleEvery: Int, samples: UnsafeMutableBufferPointer<UInt64>,
                    buffer: UnsafeMutableRawBufferPointer) -> bench_result {
        var r = bench_result()
        let start = bench_now_ns()
        let deadline = maxNs != 0 ? start + maxNs : UInt64.max
        var i = 0
        while i < ops.count {
            let end = min(i + 256, ops.count)
            while i < end {
                let outcome: Int
                if sampleEvery != 0 && i % sampleEvery == 0 {
                    let t0 = bench_now_ns()
                    outcome = oneOp(cache, data, ops[i], lend, buffer)
                    samples[Int(r.samples)] = bench_now_ns() - t0
                    r.samples += 1
                } else {
                    outcome = oneOp(cache, data, ops[i], lend, buffer)
                }
                if outcome > 0 { r.found += 1 } else if outcome == 0 { r.not_found += 1 } else { r.errors += 1 }
                i += 1
            }
            if maxNs != 0 && bench_now_ns() >= deadline { break }
        }
        r.nanoseconds = bench_now_ns() - start
        r.ops = UInt64(i)
        return r
    }

    /// The loop of the batched measurements, the Swift twin of `lc_run_batches`: `batch` over the
    /// operations `BENCH_BATCH` at a time, until `maxNs` (0: no limit), checked every 256.
    private static func runBatches(_ ops: UnsafeBufferPointer<UInt32>, maxNs: UInt64,
                                   _ batch: (UnsafeBufferPointer<UInt32>.SubSequence, inout bench_result) -> Void) -> bench_result {
        var r = bench_result()
        let width = Int(BENCH_BATCH)
        let start = bench_now_ns()
        let deadline = maxNs != 0 ? start + maxNs : UInt64.max
        var i = 0
        while i + width <= ops.count {
            let end = min(i + 256, ops.count)
            while i + width <= end {
                batch(ops[i..<i + width], &r)
                i += width
            }
            if maxNs != 0 && bench_now_ns() >= deadline { break }
        }
        r.nanoseconds = bench_now_ns() - start
        r.ops = UInt64(i)
        return r
    }

    /// The Swift counterpart of `bench_larder_c_batched_gets`: `withValues(forKeys:)`, each value
    /// copied into its buffer as `larder_get_many` copies it.
    static func runBatchedGets(_ cache: Cache, _ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>, maxNs: UInt64,
                               buffers: UnsafeMutableRawBufferPointer) -> bench_result {
        var keys: [UnsafeRawBufferPointer] = []
        return runBatches(ops, maxNs: maxNs) { batch, r in
            keys.removeAll(keepingCapacity: true)
            for op in batch { keys.append(data.key(Int(op & Op.indexMask))) }
            do {
                try cache.withValues(forKeys: keys) { j, value in
                    guard let value else { return r.not_found += 1 }
                    guard value.count == data.valueLength else { return r.errors += 1 }
                    (buffers.baseAddress! + j * data.valueLength).copyMemory(from: value.baseAddress!, byteCount: value.count)
                    r.found += 1
                }
            } catch {
                r.errors += UInt64(batch.count)
            }
        }
    }

    /// The Swift counterpart of `bench_larder_c_batched_puts`: `set(_:)` with `BENCH_BATCH` entries.
    static func runBatchedPuts(_ cache: Cache, _ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>, maxNs: UInt64) -> bench_result {
        var entries: [(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)] = []
        return runBatches(ops, maxNs: maxNs) { batch, r in
            entries.removeAll(keepingCapacity: true)
            for op in batch {
                let index = Int(op & Op.indexMask)
                entries.append((data.key(index), data.value(index)))
            }
            do {
                try cache.set(entries)
                r.found += UInt64(batch.count)
            } catch {
                r.errors += UInt64(batch.count)
            }
        }
    }

    /// The Swift counterpart of `bench_larder_c_batched_deletes`: `removeValues(forKeys:)`.
    static func runBatchedDeletes(_ cache: Cache, _ data: Dataset, _ ops: UnsafeBufferPointer<UInt32>) -> bench_result {
        var keys: [UnsafeRawBufferPointer] = []
        return runBatches(ops, maxNs: 0) { batch, r in
            keys.removeAll(keepingCapacity: true)
            for op in batch { keys.append(data.key(Int(op & Op.indexMask))) }
            do {
                let removed = try cache.removeValues(forKeys: keys)
                r.found += UInt64(removed)
                r.not_found += UInt64(batch.count - removed)
            } catch {
                // Which of the batch were removed before the failure is not known here.
                r.errors += UInt64(batch.count)
            }
        }
    }
}
