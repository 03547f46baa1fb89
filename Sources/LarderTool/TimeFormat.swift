import Foundation

/// Times stored in a cache file (milliseconds since the Unix epoch) as people read them.
enum TimeFormat {
    /// `2026-11-21 10:22:07 UTC`.
    static func date(_ milliseconds: UInt64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss 'UTC'"
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// An entry's expiry: `never`, `expired`, or the time left and the moment, e.g. `in 59m (2026-...)`.
    static func expiry(_ milliseconds: UInt64, now: UInt64) -> String {
        if milliseconds == 0 { return "never" }
        if milliseconds <= now { return "expired" }
        return "in " + duration(milliseconds - now)
    }

    /// `45s`, `12m`, `3h`, `2d`: the nearest whole unit, so that a TTL of 600 seconds, read a
    /// moment later, still shows as `10m`.
    static func duration(_ milliseconds: UInt64) -> String {
        let seconds = Double(milliseconds) / 1000
        if seconds < 59.5 { return "\(Int(seconds.rounded()))s" }
        if seconds < 3570 { return "\(Int((seconds / 60).rounded()))m" }
        if seconds < 84_600 { return "\(Int((seconds / 3600).rounded()))h" }
        return "\(Int((seconds / 86400).rounded()))d"
    }

    static func nowMilliseconds() -> UInt64 {
        UInt64(Date().timeIntervalSince1970 * 1000)
    }
}
