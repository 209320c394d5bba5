import Foundation

/// A small incremental JSON reader over a file, written here because no streaming JSON library is among
/// the workspace's dependencies and Foundation's `JSONDecoder` needs the whole document as objects (above
/// 3 GB for a 1,000,000-record bundle). It reads through a 64 KiB buffer, tracks line and column, and
/// bounds nesting, string and number length, and members per object or array, so hostile input can cost
/// neither memory nor stack. Callers read the document's outer structure token by token and each record
/// as a small `JSONValue`.
final class JSONTokenizer {
    private let input: DocumentInput
    private let limits: BundleLimits
    private var buffer: [UInt8]
    private var position = 0
    private var count = 0
    private var scratch: [UInt8] = []
    /// The 1-based line and column of the next unread byte.
    private(set) var line = 1
    private(set) var column = 1
    /// Where errors say they are; the reader keeps the JSON path.
    var locate: (BundleError) -> BundleError = { $0 }

    var bytesRead: Int64 { input.bytesRead }

    init(input: DocumentInput, limits: BundleLimits) {
        self.input = input
        self.limits = limits
        buffer = [UInt8](repeating: 0, count: 64 * 1024)
    }

    // MARK: Bytes

    /// The next byte after white space, without consuming it; nil at the end of the document.
    func peekSignificant() throws(BundleError) -> UInt8? {
        while let byte = try peek() {
            switch byte {
            case 0x20, 0x09, 0x0D: advance()
            case 0x0A:
                position += 1
                line += 1
                column = 1
            default: return byte
            }
        }
        return nil
    }

    /// Consumes `byte` (after white space) or fails saying what was expected.
    func expect(_ byte: UInt8, _ what: String) throws(BundleError) {
        guard try peekSignificant() == byte else { throw syntaxError("expected \(what)") }
        advance()
    }

    /// Consumes `byte` if it comes next (after white space).
    func consume(_ byte: UInt8) throws(BundleError) -> Bool {
        guard try peekSignificant() == byte else { return false }
        advance()
        return true
    }

    private func peek() throws(BundleError) -> UInt8? {
        if position == count {
            let read = buffer.withUnsafeMutableBytes { input.read(into: $0.baseAddress!, count: $0.count) }
            if read < 0 {
                throw locate(input.exceededLimit ? input.limitError
                    : BundleError(.unreadableFile, message: "the document could not be read", file: input.path))
            }
            position = 0
            count = read
            if read == 0 { return nil }
        }
        return buffer[position]
    }

    private func advance() {
        position += 1
        column += 1
    }

    // MARK: Tokens

    /// A string (the opening quote comes next, after white space), unescaped and checked as UTF-8.
    func readString() throws(BundleError) -> String {
        try expect(0x22, "a string")
        scratch.removeAll(keepingCapacity: true)
        while true {
            guard let byte = try peek() else { throw syntaxError("the document ends inside a string") }
            advance()
            switch byte {
            case 0x22:
                guard let text = String(validating: scratch, as: UTF8.self) else {
                    throw syntaxError("a string is not valid UTF-8")
                }
                return text
            case 0x5C:
                try readEscape()
            case 0..<0x20:
                throw syntaxError("a control character must be escaped inside a string")
            default:
                scratch.append(byte)
            }
            if scratch.count > limits.maximumStringBytes {
                throw locate(BundleError(.limitExceeded, message: "a string is longer than \(limits.maximumStringBytes) bytes",
                    line: line, column: column))
            }
        }
    }

    private func readEscape() throws(BundleError) {
        guard let byte = try peek() else { throw syntaxError("the document ends inside a string") }
        advance()
        switch byte {
        case 0x22, 0x5C, 0x2F: scratch.append(byte)
        case 0x62: scratch.append(0x08)
        case 0x66: scratch.append(0x0C)
        case 0x6E: scratch.append(0x0A)
        case 0x72: scratch.append(0x0D)
        case 0x74: scratch.append(0x09)
        case 0x75:
            var scalar = try readHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard try peek() == 0x5C else { throw syntaxError("a lone UTF-16 surrogate in a \\u escape") }
                advance()
                guard try peek() == 0x75 else { throw syntaxError("a lone UTF-16 surrogate in a \\u escape") }
                advance()
                let low = try readHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw syntaxError("a lone UTF-16 surrogate in a \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw syntaxError("a lone UTF-16 surrogate in a \\u escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw syntaxError("an invalid \\u escape") }
            scratch.append(contentsOf: String(Character(unicode)).utf8)
        default:
            throw syntaxError("an invalid escape sequence")
        }
    }

    private func readHex4() throws(BundleError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = try peek() else { throw syntaxError("the document ends inside a \\u escape") }
            advance()
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw syntaxError("an invalid \\u escape")
            }
            value = value << 4 | digit
        }
        return value
    }

    /// A number in JSON's grammar, kept as text so integers stay exact.
    func readNumber() throws(BundleError) -> JSONNumber {
        _ = try peekSignificant()
        scratch.removeAll(keepingCapacity: true)
        var isInteger = true
        func take(_ allowed: (UInt8) -> Bool) throws(BundleError) -> Int {
            var taken = 0
            while let byte = try peek(), allowed(byte) {
                scratch.append(byte)
                advance()
                taken += 1
                if scratch.count > 64 { throw syntaxError("a number is longer than 64 characters") }
            }
            return taken
        }
        let isDigit: (UInt8) -> Bool = { (0x30...0x39).contains($0) }
        _ = try take { $0 == 0x2D && self.scratch.isEmpty }
        let integerDigits = try take(isDigit)
        guard integerDigits > 0 else { throw syntaxError("expected a value") }
        if integerDigits > 1, scratch[scratch.count - integerDigits] == 0x30 {
            throw syntaxError("a number has a leading zero")
        }
        if try peek() == 0x2E {
            isInteger = false
            scratch.append(0x2E)
            advance()
            guard try take(isDigit) > 0 else { throw syntaxError("a number has no digits after its decimal point") }
        }
        if let byte = try peek(), byte == 0x65 || byte == 0x45 {
            isInteger = false
            scratch.append(byte)
            advance()
            _ = try take { ($0 == 0x2B || $0 == 0x2D) && (self.scratch.last == 0x65 || self.scratch.last == 0x45) }
            guard try take(isDigit) > 0 else { throw syntaxError("a number has no digits in its exponent") }
        }
        return JSONNumber(text: String(decoding: scratch, as: UTF8.self), isInteger: isInteger)
    }

    /// A whole value, for the small parts of a bundle (one record, one file reference).
    func readValue(depth: Int) throws(BundleError) -> JSONValue {
        guard depth <= limits.maximumDepth else {
            throw locate(BundleError(.limitExceeded, message: "values nest deeper than \(limits.maximumDepth) levels",
                line: line, column: column))
        }
        guard let byte = try peekSignificant() else { throw syntaxError("the document ends where a value belongs") }
        switch byte {
        case 0x7B:
            advance()
            var members: [(String, JSONValue)] = []
            if try consume(0x7D) { return .object(members) }
            repeat {
                let key = try readString()
                try expect(0x3A, "':' after a key")
                let value = try readValue(depth: depth + 1)
                guard !members.contains(where: { $0.0 == key }) else {
                    throw locate(BundleError(.malformedJSON, message: "the key '\(key)' appears twice in one object",
                        line: line, column: column))
                }
                members.append((key, value))
                try checkMembers(members.count)
            } while try consume(0x2C)
            try expect(0x7D, "',' or '}'")
            return .object(members)
        case 0x5B:
            advance()
            var elements: [JSONValue] = []
            if try consume(0x5D) { return .array(elements) }
            repeat {
                elements.append(try readValue(depth: depth + 1))
                try checkMembers(elements.count)
            } while try consume(0x2C)
            try expect(0x5D, "',' or ']'")
            return .array(elements)
        case 0x22:
            return .string(try readString())
        case 0x74:
            try readWord("true")
            return .bool(true)
        case 0x66:
            try readWord("false")
            return .bool(false)
        case 0x6E:
            try readWord("null")
            return .null
        default:
            return .number(try readNumber())
        }
    }

    /// Fails unless only white space is left.
    func expectEnd() throws(BundleError) {
        if try peekSignificant() != nil { throw syntaxError("unexpected text after the end of the document") }
    }

    private func readWord(_ word: StaticString) throws(BundleError) {
        let bytes = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for expected in bytes {
            guard try peek() == expected else { throw syntaxError("expected a value") }
            advance()
        }
    }

    private func checkMembers(_ count: Int) throws(BundleError) {
        guard count <= limits.maximumObjectMembers else {
            throw locate(BundleError(.limitExceeded,
                message: "an object or array inside a record has more than \(limits.maximumObjectMembers) members",
                line: line, column: column))
        }
    }

    func syntaxError(_ message: String) -> BundleError {
        locate(BundleError(.malformedJSON, message: message, line: line, column: column))
    }
}

/// A JSON number as written, so an integer is never rounded through a `Double`.
struct JSONNumber: Hashable {
    var text: String
    var isInteger: Bool
}

/// A small JSON value: one record or one file reference, never the whole document.
indirect enum JSONValue {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// The JSON Schema type name, for error messages.
    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number(let number): number.isInteger ? "integer" : "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}
