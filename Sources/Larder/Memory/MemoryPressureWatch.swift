#if canImport(Darwin)
import Dispatch

/// Apple platforms: listens to the system's memory-pressure events for one memory tier, for as
/// long as the tier lives. A warning halves the tier's cost; a critical event empties it.
///
/// Sendable: its one property never changes, and a dispatch source may be used from any thread.
final class MemoryPressureWatch: @unchecked Sendable {
    private let source: DispatchSourceMemoryPressure

    init(tier: MemoryTier) {
        source = DispatchSource.makeMemoryPressureSource(eventMask: [.warning, .critical], queue: .global(qos: .utility))
        source.setEventHandler { [weak tier, weak self] in
            guard let event = self?.source.data else { return }
            if event.contains(.critical) {
                tier?.relieve(.critical)
            } else if event.contains(.warning) {
                tier?.relieve(.warning)
            }
        }
        source.activate()
    }

    deinit {
        source.cancel()
    }
}
#endif
