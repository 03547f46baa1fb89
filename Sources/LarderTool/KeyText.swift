/// Keys and values shown safely on a terminal, and keys read from the command line.
///
/// Valid UTF-8 is shown as it is, except characters that do not show as themselves: controls,
/// invisible and ignorable characters (bidirectional overrides, zero-width characters, variation
/// selectors), line and paragraph separators, and spaces other than the plain one. Those and
/// every byte of invalid UTF-8 are escaped, byte by byte, as `\xNN`, and a backslash as `\\`.
/// So keys can neither garble a terminal nor hide characters (a hostile file's `a\u{202E}b` does
/// not show as `ab` reversed). Keys that merely look alike (a precomposed `é` and `e` with a
/// combining accent, Latin `a` and Cyrillic `а`) show as they are; `key_hex` tells them apart.
enum KeyText {
    static func display(_ bytes: [UInt8]) -> String {
        var text = ""
        var index = 0
        while index < bytes.count {
            let length = sequenceLength(bytes, at: index)
            if length == 0 {
                text += escape(bytes[index])
                index += 1
                continue
            }
            let scalar = String(decoding: bytes[index..<index + length], as: UTF8.self)
            let character = scalar.unicodeScalars.first!
            if !showsAsItself(character) {
                text += bytes[index..<index + length].map(escape).joined()
            } else if character == "\\" {
                text += "\\\\"
            } else {
                text += scalar
            }
            index += length
        }
        return text
    }

    /// Whether `character` shows on a terminal as something (no invisible or ignorable
    /// character, which would hide in a key), and only as itself (no control sequence).
    private static func showsAsItself(_ character: Unicode.Scalar) -> Bool {
        if character.properties.isDefaultIgnorableCodePoint { return false }
        switch character.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned:
            return false
        case .spaceSeparator:
            return character == " "
        default:
            return true
        }
    }

    /// The key given on the command line: its UTF-8 bytes, or with `hex` the bytes it spells.
    static func parse(_ text: String, hex: Bool) -> [UInt8]? {
        hex ? ByteFormat.bytes(hex: text) : Array(text.utf8)
    }

    /// The text of `bytes` when they are valid UTF-8 (for JSON), else nil.
    static func utf8(_ bytes: [UInt8]) -> String? {
        String(validating: bytes, as: UTF8.self)
    }

    private static func escape(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return "\\x" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 15)])
    }

    /// Bytes of the well-formed UTF-8 sequence at `index`, or 0 when there is none.
    private static func sequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let first = bytes[index]
        let length: Int
        switch first {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return 0
        }
        guard index + length <= bytes.count else { return 0 }
        return String(validating: bytes[index..<index + length], as: UTF8.self) == nil ? 0 : length
    }
}
