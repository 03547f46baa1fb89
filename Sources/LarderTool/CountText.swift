/// Counts of entries as the tool's sentences say them: `1 entry`, `3 entries`, `2 expired entries`.
enum CountText {
    static func entries(_ count: Int, _ kind: String? = nil) -> String {
        "\(count) \(kind.map { "\($0) " } ?? "")\(count == 1 ? "entry" : "entries")"
    }
}
