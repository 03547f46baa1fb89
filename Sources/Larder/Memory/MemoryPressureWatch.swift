#if canImport(Darwin)
import Dispatch

/// Apple platforms: listens to the system's memory-pressure events for one memory tier, for as
/// long as the tier lives. A warning halves the tier's cost; a critical event empties it.
final class MemoryPressureWatch {
    private let source: DispatchSourceMemoryPressure

    init(tier: MemoryTier) {
        let source = DispatchSource.makeMemoryPressureSource(eventMask: [.warning, .critical], queue: .global(qos: .utility))
        source.setEventHandler { [weak tier, unowned source] in
            let event = source.data
            if event.contains(.critical) {
                tier?.relieve(.critical)
            } else if event.contains(.warning) {
                tier?.relieve(.warning)
            }
        }
        source.activate()
        self.source = source
    }

    deinit {
        source.cancel()
    }
}
#endif
