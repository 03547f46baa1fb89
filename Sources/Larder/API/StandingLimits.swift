import Foundation

/// The standing limits of `Cache.Options`, checked and in the file's units (FORMAT.md 2.1): nil
/// keeps the file's limit, 0 removes it.
struct StandingLimits {
    var count: UInt64?
    /// Milliseconds.
    var maximumAge: UInt64?
    /// Milliseconds between sweeps; nil for none.
    var sweepInterval: UInt64?

    /// The largest maximum age the file takes: ages of 2^62 ms (146 million years) and more
    /// never expire an entry, and sums with a time stored cannot overflow.
    static let longestAge: UInt64 = 1 << 62

    /// Refuses a count limit of 0 or less, and an age or interval that is not a positive number.
    init(_ options: Cache.Options, path: String) throws(LarderError) {
        if let limit = options.countLimit {
            guard limit > 0 else {
                throw LarderError(.invalidArgument, "the count limit must be at least 1, not \(limit)", path: path)
            }
            count = limit == .max ? 0 : UInt64(limit)
        }
        if let age = options.maximumAge {
            guard age > 0 else {
                throw LarderError(.invalidArgument, "the maximum age must be more than 0 seconds, not \(age)", path: path)
            }
            maximumAge = age.isInfinite ? 0 : Self.milliseconds(age)
        }
        if let interval = options.sweepInterval {
            guard interval > 0, interval.isFinite else {
                throw LarderError(.invalidArgument, "the sweep interval must be a positive number of seconds, not \(interval)", path: path)
            }
            sweepInterval = Self.milliseconds(interval)
        }
    }

    /// Whole milliseconds, the nearest (at least 1), at most `longestAge`.
    private static func milliseconds(_ seconds: TimeInterval) -> UInt64 {
        UInt64(max(1, min((seconds * 1000).rounded(), Double(longestAge))))
    }
}
