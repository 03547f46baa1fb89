#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one place where libc calls are made: retries on `EINTR`, turns failures into `LarderError`.
enum SystemCall {
    /// Runs `body` until it does not fail with `EINTR`; a result of -1 becomes an `.io` error
    /// (or `.full` for `ENOSPC`, `EDQUOT`, `EFBIG`) naming `operation`.
    @discardableResult
    static func retrying<T: FixedWidthInteger>(_ operation: String, _ body: () -> T) throws(LarderError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw error(operation, errno: code)
        }
    }

    /// A `LarderError` for a failed system call.
    static func error(_ operation: String, errno code: Int32) -> LarderError {
        let text = String(cString: strerror(code))
        switch code {
        case ENOSPC, EDQUOT, EFBIG:
            return LarderError(.full, "\(operation): \(text)")
        case ENOMEM:
            return LarderError(.noMemory, "\(operation): \(text)")
        default:
            return LarderError(.io, "\(operation): \(text)")
        }
    }

    /// Milliseconds from an arbitrary start that never jumps (for timeouts).
    static func monotonicMilliseconds() -> UInt64 {
        milliseconds(of: CLOCK_MONOTONIC)
    }

    /// Milliseconds since the Unix epoch, from the wall clock (expiry times are wall-clock times,
    /// shared between processes). Served from the vDSO / commpage: no system call.
    static func nowMilliseconds() -> UInt64 {
        milliseconds(of: CLOCK_REALTIME)
    }

    /// The milliseconds of `clock`, in unsigned arithmetic (a time before its start counts as
    /// its start). The time is read into memory that is not given a stack guard: the callers are
    /// the puts and reads, and a guard is five instructions on each.
    @inline(__always)
    private static func milliseconds(of clock: clockid_t) -> UInt64 {
        var time = timespec()
        _ = _withUnprotectedUnsafeMutablePointer(to: &time) { clock_gettime(clock, $0) }
        // All ones from the clock's start on, 0 before it (where tv_nsec still counts up): no branch.
        let sinceStart = UInt64(truncatingIfNeeded: ~(time.tv_sec >> (time_t.bitWidth - 1)))
        return (UInt64(truncatingIfNeeded: time.tv_sec) &* 1000 &+ UInt64(truncatingIfNeeded: time.tv_nsec) / 1_000_000) & sinceStart
    }
}
