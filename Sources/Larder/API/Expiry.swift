import Foundation

/// When an entry stops being returned.
///
/// Expiry is wall-clock time stored with each record in milliseconds since 1970, so every process
/// sharing the file agrees on it. An expired entry is never returned; its space is reclaimed
/// when the ring comes around to it.
public enum Expiry: Hashable, Sendable {
    /// The entry stays until it is evicted, replaced or removed.
    case never
    /// The entry expires this many seconds after it is stored.
    case seconds(Double)
    /// The entry expires at this moment.
    case date(Date)
    /// The entry expires this many seconds after it was last read or stored, in any process.
    /// Reads through read-only handles do not push it back (docs/GUIDE.md).
    case sliding(Double)

    /// Whether this is a time at all: `.seconds(.nan)` is not (a computation gone wrong), and
    /// `set` refuses it rather than store an entry that is expired at once.
    @inline(__always)
    var isNumber: Bool {
        switch self {
        case .never: true
        case .seconds(let seconds), .sliding(let seconds): !seconds.isNaN
        case .date(let date): !date.timeIntervalSince1970.isNaN
        }
    }

    /// The record flags of an entry stored at `now` with `deadline` (`deadline(now:)`): a sliding
    /// window that has not run out at once is marked so (FORMAT.md 4.8).
    @inline(__always)
    func flags(now: UInt64, deadline: UInt64) -> UInt8 {
        if case .sliding = self, deadline > now { return RecordHeader.slidingFlag }
        return 0
    }

    /// The deadline of an entry stored at `storedAt` and written at `now`: a sliding window counts
    /// from the time stored, so that the record holds exactly the window (FORMAT.md 4.8).
    @inline(__always)
    func deadline(now: UInt64, storedAt: UInt64) -> UInt64 {
        // Inline for the usual write, which stores no expiry; the others make the call.
        if case .never = self { return 0 }
        if case .sliding = self { return deadline(now: storedAt) }
        return deadline(now: now)
    }

    /// Milliseconds since the Unix epoch to store in the record; 0 means never.
    func deadline(now: UInt64) -> UInt64 {
        switch self {
        case .never:
            return 0
        case .seconds(let seconds), .sliding(let seconds):
            guard seconds.isFinite else { return seconds > 0 ? 0 : 1 }
            let delta = (seconds * 1000).rounded(.up)
            if delta <= 0 { return 1 }
            return now &+ UInt64(min(delta, Double(UInt64.max / 2)))
        case .date(let date):
            let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.up)
            guard milliseconds.isFinite else { return milliseconds > 0 ? 0 : 1 }
            return milliseconds <= 1 ? 1 : UInt64(min(milliseconds, Double(UInt64.max / 2)))
        }
    }
}
