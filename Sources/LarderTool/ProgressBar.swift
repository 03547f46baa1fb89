import Foundation

/// A one-line progress bar on stderr, drawn only when stderr is a terminal and the work is
/// large, so that pipes, logs and tests see nothing of it.
final class ProgressBar {
    private let label: String
    private let enabled: Bool
    private var lastPercent = -1

    /// Work below this many bytes finishes too fast for a bar to help.
    static let threshold = 64 << 20

    init(_ label: String, totalBytes: Int) {
        self.label = label
        enabled = Output.stderrIsTerminal && totalBytes >= ProgressBar.threshold
    }

    func update(_ done: Int, _ total: Int) {
        guard enabled, total > 0 else { return }
        let percent = min(100, done * 100 / total)
        guard percent != lastPercent else { return }
        lastPercent = percent
        let width = 30
        let filled = percent * width / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        Output.toStandardError("\r\(label) [\(bar)] \(percent)%")
    }

    /// Clears the line again.
    func finish() {
        guard enabled, lastPercent >= 0 else { return }
        Output.toStandardError("\r\u{1B}[K")
    }
}
