@_spi(Inspection) import Larder

/// One JSON object on one line, its members in the order they were added: the stable form of
/// `larder dump --json` (docs/CLI.md). Written by hand so the order never depends on a
/// serializer's choices.
struct JSONLine {
    private var members: [String] = []

    mutating func add(_ name: String, _ value: String?) {
        members.append(JSONLine.quote(name) + ":" + (value.map(JSONLine.quote) ?? "null"))
    }

    mutating func add(_ name: String, _ value: Int) {
        members.append(JSONLine.quote(name) + ":" + String(value))
    }

    mutating func add(_ name: String, _ value: UInt64?) {
        members.append(JSONLine.quote(name) + ":" + (value.map { String($0) } ?? "null"))
    }

    mutating func add(_ name: String, _ value: Bool) {
        members.append(JSONLine.quote(name) + ":" + (value ? "true" : "false"))
    }

    var text: String { "{" + members.joined(separator: ",") + "}" }

    /// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped.
    static func quote(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}


extension JSONLine {
    /// An entry's members in `larder dump --json` and `larder entry --json`, values aside.
    static func entry(_ entry: EntryRecord, maximumAge: UInt64) -> JSONLine {
        var line = JSONLine()
        line.add("key", KeyText.utf8(entry.key))
        line.add("key_hex", ByteFormat.hex(entry.key))
        line.add("rank", entry.rank ?? 0)
        line.add("size", entry.rawLength)
        line.add("stored_size", entry.storedLength)
        line.add("record_size", entry.recordSize)
        line.add("compressed", entry.isCompressed)
        line.add("expires_at", entry.expiresAt == 0 ? nil : entry.expiresAt)
        line.add("sliding", entry.isSliding)
        line.add("expired", entry.isExpired(now: TimeFormat.nowMilliseconds(), maximumAge: maximumAge))
        line.add("stored_at", entry.storedAt)
        line.add("read", entry.wasRead)
        line.add("sequence", entry.sequence)
        line.add("offset", entry.offset)
        line.add("intact", entry.isIntact)
        return line
    }
}
