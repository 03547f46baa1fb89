import Foundation
import Larder

extension Expiry {
    /// The expiry of a value that `duration` from now stops being returned.
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .seconds(Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// The expiry of a value with this deadline (`nil` for none).
    init(_ deadline: Date?) {
        self = deadline.map { .date($0) } ?? .never
    }

    /// The moment this expiry names, counted from now; `nil` for never.
    var deadline: Date? {
        switch self {
        case .never: nil
        case .seconds(let seconds): Date(timeIntervalSinceNow: seconds)
        // The end of the first window: reads may push it later.
        case .sliding(let seconds): Date(timeIntervalSinceNow: seconds)
        case .date(let date): date
        }
    }
}
