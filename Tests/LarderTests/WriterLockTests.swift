import CLarderSupport
import Foundation
import Testing

/// The writer lock on its own, in process memory: a holder that ends without giving it back is
/// reported to the next holder, however the lock was taken and given back before.
@Suite("Writer lock", .failsIfItHangs)
struct WriterLockTests {
    /// A lock area of `LRD_WRITER_LOCK_SIZE` bytes, formatted; freed by `free`.
    final class Area: @unchecked Sendable {
        let pointer = UnsafeMutableRawPointer.allocate(byteCount: Int(LRD_WRITER_LOCK_SIZE), alignment: 64)
        init() { #expect(lrd_writer_lock_init(pointer) == 0) }
        deinit { pointer.deallocate() }
        func lock() -> Int32 { lrd_writer_lock(pointer, -1) }
        func unlock() { lrd_writer_unlock(pointer, -1) }
    }

    /// Takes the lock, expecting its last holder to have ended holding it, makes it usable and
    /// gives it back; then takes and gives it back once more as usual.
    func expectDeadHolder(_ area: Area) async throws {
        let outcomes = try await onOwnThread { () -> [Int32] in
            let died = area.lock()
            if died == Int32(LRD_LOCK_OWNER_DIED) { lrd_writer_lock_consistent(area.pointer) }
            area.unlock()
            let again = area.lock()
            area.unlock()
            return [died, again]
        }
        #expect(outcomes == [Int32(LRD_LOCK_OWNER_DIED), Int32(LRD_LOCK_ACQUIRED)])
    }

    @Test func aThreadThatEndsHoldingTheLockIsReportedDead() async throws {
        let area = Area()
        let taken = try await onOwnThread { area.lock() }
        #expect(taken == Int32(LRD_LOCK_ACQUIRED))
        try await expectDeadHolder(area)
    }

    /// The lock taken while the thread holds another robust lock, given back after it, then taken
    /// again and kept: the thread's list of robust locks stays whole, and its end is seen.
    @Test func aLockTakenBesideAnotherIsReportedDeadAfterBoth() async throws {
        let area = Area(), other = Area()
        let taken = try await onOwnThread { () -> [Int32] in
            let first = other.lock()
            let second = area.lock()
            other.unlock()
            area.unlock()
            let third = other.lock()
            let fourth = area.lock()
            area.unlock()
            other.unlock()
            return [first, second, third, fourth, area.lock()]
        }
        #expect(taken == Array(repeating: Int32(LRD_LOCK_ACQUIRED), count: 5))
        try await expectDeadHolder(area)
        let otherAgain = try await onOwnThread { () -> Int32 in
            let rc = other.lock()
            other.unlock()
            return rc
        }
        #expect(otherAgain == Int32(LRD_LOCK_ACQUIRED))
    }

    /// A holder that gives the lock back while another thread waits for it wakes that thread,
    /// which then holds it; the holder's list of robust locks is whole after (its end is seen).
    @Test func theReleaseWakesAThreadWaitingForTheLock() async throws {
        let area = Area()
        let outcomes = try await onOwnThread { () -> [Int32] in
            let first = area.lock()
            // Written by the waiter before it signals, read after the wait.
            final class Outcome: @unchecked Sendable { var rc: Int32 = -1 }
            let waited = Outcome(), done = DispatchSemaphore(value: 0)
            Thread {
                waited.rc = area.lock()
                area.unlock()
                done.signal()
            }.start()
            // The waiter announces itself in the lock word (glibc's waiters bit) before it sleeps:
            // the release then has a waiter to wake. Elsewhere, a while is given.
            #if canImport(Glibc)
            while area.pointer.load(as: UInt32.self) & 0x8000_0000 == 0 { usleep(1_000) }
            #else
            usleep(100_000)
            #endif
            area.unlock()
            done.wait()
            // Taken again and kept: the thread then ends holding it.
            return [first, waited.rc, area.lock()]
        }
        #expect(outcomes == Array(repeating: Int32(LRD_LOCK_ACQUIRED), count: 3))
        try await expectDeadHolder(area)
    }
}
