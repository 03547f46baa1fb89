/// A clock reading taken before a write with a short time to live. A read made soon after finds
/// the value; on a loaded machine the read may come after that time, when the value is gone. A
/// test checks what such a read found only when the read came in time.
public struct Stopwatch: Sendable {
    private let start = ContinuousClock.now

    public init() {}

    /// The time since the reading.
    public var elapsed: Duration { ContinuousClock.now - start }

    /// Whether less than `timeToLive` has passed since the reading, less 20 ms for the clocks'
    /// rounding: a value stored after it with that time to live is still there.
    public func isWithin(_ timeToLive: Duration) -> Bool { elapsed < timeToLive - .milliseconds(20) }
}
