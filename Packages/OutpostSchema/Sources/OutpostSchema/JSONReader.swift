import Foundation

/// A pull reader over one JSON document held in memory, for the wire's hot paths (a pull page of
/// 500 records): the caller walks objects and arrays and takes values in place, so no
/// `JSONDecoder` container or intermediate tree is built. `JSONWriter`'s counterpart; strict RFC 8259
/// syntax, depth bounded, unknown members skipped by the caller with `skipValue()`.
public struct JSONReader: Sendable {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0
    /// Nesting allowed before the document is refused, so hostile input cannot exhaust the stack.
    public static let maximumDepth = 64
    /// Fields (and clocks) one record may carry before it is refused, as an app's schema may declare no
    /// more: read, each name costs a dictionary entry many times its bytes, and 907,000 unknown names
    /// in one record of a 20 MiB page held a device near 1 GB (attack 83).
    public static let maximumFields = 1_000

    /// The room a record's field table is made with before its fields are read (`fields(expecting:)`):
    /// a record has tens of fields, and grown from empty a table is rebuilt four times on the way.
    public static let defaultFieldRoom = 20

    /// A reader of `data`, positioned before its one top-level value.
    public init(_ data: Data) {
        bytes = [UInt8](data)
    }

    /// A reader of `bytes`, positioned before its one top-level value: how a streaming front end
    /// (the bundle importer's) hands over each value it framed, so one core scans every JSON value.
    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// What kind of value comes next, consuming nothing; nil at the end of the input.
    public mutating func nextValueKind() -> JSONValueKind? {
        skipWhitespace()
        switch peek {
        case nil: return nil
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        default: return .number
        }
    }

    /// A number value's text as written (RFC 8259 grammar, at most 64 characters), and whether it has
    /// neither fraction nor exponent: for a caller that keeps integers exact whatever their size.
    public mutating func numberText() throws(JSONReaderError) -> (text: String, isInteger: Bool) {
        let (range, isInteger) = try number()
        return (String(decoding: bytes[range], as: UTF8.self), isInteger)
    }

    /// Fails unless only whitespace follows the value read last.
    public mutating func expectEnd() throws(JSONReaderError) {
        skipWhitespace()
        guard index == bytes.count else { throw error("unexpected content after the document") }
    }

    // MARK: Containers

    /// Consumes `{`; then call `nextKey()` until it returns nil.
    public mutating func beginObject() throws(JSONReaderError) {
        try open(UInt8(ascii: "{"), "an object")
        objectStart = true
    }

    /// The next member's name, having consumed it and its colon, or nil (having consumed `}`) when
    /// the object ends.
    public mutating func nextKey() throws(JSONReaderError) -> String? {
        skipWhitespace()
        if try closes(UInt8(ascii: "}")) { return nil }
        let key = try string()
        skipWhitespace()
        guard peek == UInt8(ascii: ":") else { throw error("expected ':' after a member name") }
        index += 1
        return key
    }

    /// Consumes `[`; then call `nextElement()` before each element.
    public mutating func beginArray() throws(JSONReaderError) {
        try open(UInt8(ascii: "["), "an array")
        objectStart = true
    }

    /// Whether another element follows (its separator consumed), or false (`]` consumed).
    public mutating func nextElement() throws(JSONReaderError) -> Bool {
        skipWhitespace()
        return try !closes(UInt8(ascii: "]"))
    }

    /// Marks member `index` (below 64) of the object being read as seen, refusing it when it was seen
    /// already: `JSONDecoder` keeps the first of a repeated member, so a reader that kept the last would
    /// read the same document differently. `seen` starts at 0 for each object.
    public func firstOccurrence(of index: Int, _ name: String, in seen: inout UInt64) throws(JSONReaderError) {
        let bit: UInt64 = 1 << UInt64(index)
        guard seen & bit == 0 else { throw error("'\(name)' appears twice in one object") }
        seen |= bit
    }

    /// Whether the next value is `null`, consuming it if so.
    public mutating func takeNull() throws(JSONReaderError) -> Bool {
        skipWhitespace()
        guard peek == UInt8(ascii: "n") else { return false }
        try word("null")
        return true
    }

    // MARK: Scalars

    /// A string value, escapes resolved; invalid UTF-8 is refused rather than repaired.
    public mutating func string() throws(JSONReaderError) -> String {
        skipWhitespace()
        guard peek == UInt8(ascii: "\"") else { throw error("expected a string") }
        index += 1
        let start = index
        var isASCII = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                defer { index += 1 }
                // ASCII needs no validation; only other text pays for it.
                return isASCII ? bytes.withUnsafeBufferPointer { String(decoding: $0[start..<index], as: UTF8.self) } : try text(start..<index)
            }
            isASCII = isASCII && byte < 0x80
            if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
            guard byte >= 0x20 else { throw error("a control character in a string") }
            index += 1
        }
        throw error("an unterminated string")
    }

    /// The bytes of a string value of plain ASCII (no escape, nothing above 0x7F), consumed, without
    /// building a `String`: for values of a fixed ASCII form, such as clocks, parsed in place. Nil, with
    /// nothing consumed, for any other string; the caller then reads it with `string()`.
    public mutating func plainASCIIString() throws(JSONReaderError) -> ArraySlice<UInt8>? {
        skipWhitespace()
        guard peek == UInt8(ascii: "\"") else { throw error("expected a string") }
        var end = index + 1
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") {
                defer { index = end + 1 }
                return bytes[(index + 1)..<end]
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        return nil
    }

    /// An integer value that fits in 64 bits. A number written with a fraction or an exponent is
    /// taken when the number it writes is whole (`5.0`, `1e3`, `12.50e1`), read exactly from its digits:
    /// read through a `Double`, `9007199254740993.0` became 9007199254740992 and `4.9999999999999999`
    /// became 5, values their sender never wrote (attack 100, F1).
    public mutating func integer() throws(JSONReaderError) -> Int64 {
        let (range, isInteger) = try number()
        var position = range.lowerBound
        let negative = bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        if isInteger {
            var value: Int64 = 0
            while position < range.upperBound {
                let digit = Int64(bytes[position] &- 0x30)
                let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (next, overflow2) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
                guard !overflow1, !overflow2 else { throw error("an integer out of the 64-bit range", at: range.lowerBound) }
                value = next
                position += 1
            }
            return value
        }
        // The digits before the exponent, the fraction's included, and the power of ten they are scaled by.
        var digits: [UInt8] = []
        var scale = 0
        var inFraction = false
        while position < range.upperBound {
            let byte = bytes[position]
            if byte == UInt8(ascii: ".") {
                inFraction = true
            } else if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                break
            } else {
                digits.append(byte &- 0x30)
                if inFraction { scale -= 1 }
            }
            position += 1
        }
        if position < range.upperBound {
            // The exponent; past 10,000 in size only a zero can still be a 64-bit integer.
            position += 1
            var exponentNegative = false
            if bytes[position] == UInt8(ascii: "-") || bytes[position] == UInt8(ascii: "+") {
                exponentNegative = bytes[position] == UInt8(ascii: "-")
                position += 1
            }
            var exponent = 0
            while position < range.upperBound {
                exponent = min(exponent * 10 + Int(bytes[position] &- 0x30), 10_000)
                position += 1
            }
            scale += exponentNegative ? -exponent : exponent
        }
        // Leading zeros (a fraction's, as in `0.000…1`) are dropped at once: one at a time was quadratic.
        guard let first = digits.firstIndex(where: { $0 != 0 }) else { return 0 }
        digits.removeFirst(first)
        // A fraction's trailing zeros write nothing; any other digit past the point is not whole.
        while scale < 0, digits.last == 0 {
            digits.removeLast()
            scale += 1
        }
        guard scale >= 0 else { throw error("expected an integer", at: range.lowerBound) }
        guard digits.count + scale <= 19 else { throw error("an integer out of the 64-bit range", at: range.lowerBound) }
        digits += repeatElement(0, count: scale)
        var value: Int64 = 0
        for digit in digits {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? shifted.subtractingReportingOverflow(Int64(digit)) : shifted.addingReportingOverflow(Int64(digit))
            guard !overflow1, !overflow2 else { throw error("an integer out of the 64-bit range", at: range.lowerBound) }
            value = next
        }
        return value
    }

    /// A number value as a `Double`.
    public mutating func double() throws(JSONReaderError) -> Double {
        let (range, _) = try number()
        guard let value = Double(String(decoding: bytes[range], as: UTF8.self)), value.isFinite else {
            throw error("a number out of range", at: range.lowerBound)
        }
        return value
    }

    /// A `true` or `false` value.
    public mutating func bool() throws(JSONReaderError) -> Bool {
        skipWhitespace()
        switch peek {
        case UInt8(ascii: "t"): try word("true"); return true
        case UInt8(ascii: "f"): try word("false"); return false
        default: throw error("expected true or false")
        }
    }

    /// Reads past the next value, whatever it is (an unknown member's).
    public mutating func skipValue() throws(JSONReaderError) {
        switch nextValueKind() {
        case .object?:
            try beginObject()
            while try nextKey() != nil { try skipValue() }
        case .array?:
            try beginArray()
            while try nextElement() { try skipValue() }
        case .string?: _ = try string()
        case .bool?: _ = try bool()
        case .null?: _ = try takeNull()
        case .number?, nil: _ = try number()
        }
    }

    // MARK: Field values

    /// A `FieldValue` in its wire form: `null` or an object with exactly one of the keys `bool`,
    /// `integer`, `real`, `text`, `date`, `uuid`, `blob`.
    public mutating func fieldValue() throws(JSONReaderError) -> FieldValue {
        if try takeNull() { return .null }
        let start = index
        try beginObject()
        guard let kind = try nextKindKey(at: start) else { throw error("an empty object is not a field value", at: start) }
        let value: FieldValue
        switch kind {
        case .bool: value = .bool(try bool())
        case .integer: value = .integer(try integer())
        case .real: value = .real(try double())
        case .text: value = .text(try string())
        case .date:
            let text = try string()
            guard let date = Timestamp.date(from: text) else { throw error("'\(text)' is not an ISO 8601 timestamp", at: start) }
            value = .date(date)
        case .uuid:
            value = .uuid(try uuid(at: start))
        case .blob:
            let text = try string()
            guard let blob = FieldValue.blob(fromBase64: Data(text.utf8)) else { throw error("a blob is not valid base64", at: start) }
            value = blob
        }
        skipWhitespace()
        guard try closes(UInt8(ascii: "}")) else { throw error("a field value has more than one key", at: start) }
        return value
    }

    /// The key of a field value's object.
    private enum ValueKindKey: CaseIterable {
        case bool, integer, real, text, date, uuid, blob

        private static let names: [(ValueKindKey, [UInt8])] = allCases.map { ($0, Array("\($0)".utf8)) }

        init?<Name: Collection<UInt8>>(_ name: Name) {
            guard let (kind, _) = Self.names.first(where: { $0.1.elementsEqual(name) }) else { return nil }
            self = kind
        }
    }

    /// `nextKey()` for a field value's one key, matched in place against the kinds instead of built as
    /// a string: with the check that no second key follows, a tenth of decoding a pulled record
    /// (`perf`). A key written with escapes is resolved first, as `nextKey()` resolves it.
    private mutating func nextKindKey(at start: Int) throws(JSONReaderError) -> ValueKindKey? {
        skipWhitespace()
        if try closes(UInt8(ascii: "}")) { return nil }
        let kind: ValueKindKey?
        if let name = try plainASCIIString() {
            kind = ValueKindKey(name)
            if kind == nil { throw error("'\(String(decoding: name, as: UTF8.self))' is not a field value kind", at: start) }
        } else {
            let name = try string()
            kind = ValueKindKey(name.utf8)
            if kind == nil { throw error("'\(name)' is not a field value kind", at: start) }
        }
        skipWhitespace()
        guard peek == UInt8(ascii: ":") else { throw error("expected ':' after a member name") }
        index += 1
        return kind
    }

    /// A string value holding a UUID in its hyphenated form (either case), parsed in place; an error
    /// points at the value's start.
    public mutating func uuid() throws(JSONReaderError) -> UUID {
        skipWhitespace()
        return try uuid(at: index)
    }

    private mutating func uuid(at start: Int) throws(JSONReaderError) -> UUID {
        if let text = try plainASCIIString() {
            guard let id = text.withUnsafeBufferPointer(UUID.init(hyphenatedUTF8:)) else {
                throw error("'\(String(decoding: text, as: UTF8.self))' is not a UUID", at: start)
            }
            return id
        }
        let text = try string()
        guard let id = UUID(hyphenatedText: text) else { throw error("'\(text)' is not a UUID", at: start) }
        return id
    }

    /// The object of field values that is the whole of `json`, nothing after it: a record's fields as a
    /// server stores them. The one reading of stored fields, for the server's rows and their bundles.
    public static func wholeFields(of json: String) throws(JSONReaderError) -> [String: FieldValue] {
        var reader = JSONReader(bytes: Array(json.utf8))
        let fields = try reader.fields()
        try reader.expectEnd()
        return fields
    }

    /// An object of field values, `{"name": value, …}`; a repeated name is refused.
    ///
    /// - Parameter count: how many fields the record should have (its entity's catalog count, when the
    ///   entity was read before its fields, as every writer of the wire sorts its keys), or nil when that
    ///   is not known. The table is made room for that many and no more than `defaultFieldRoom`: a table
    ///   too big for its record costs the memory of every record of a page, and the clocks mapped from
    ///   its fields take a table of the same size.
    public mutating func fields(expecting count: Int? = nil) throws(JSONReaderError) -> [String: FieldValue] {
        try beginObject()
        // Only ever smaller than the room a record is given without a count: the count comes from the
        // entity the peer names, not from what it sends, and a table sized by a wide entity's for a
        // record of no fields would let a page of them take far more memory than its fields bound allows.
        // A record of more fields grows its table as they come.
        var fields = [String: FieldValue](minimumCapacity: min(count ?? Self.defaultFieldRoom, Self.defaultFieldRoom))
        while let name = try nextKey() {
            let position = index
            guard fields.count < Self.maximumFields else {
                throw error("a record carries more than \(Self.maximumFields) fields", at: position)
            }
            guard fields.updateValue(try fieldValue(), forKey: name) == nil else {
                throw error("the field '\(name)' appears twice", at: position)
            }
        }
        return fields
    }

    /// An error at the current position, for callers that find a well-formed value they cannot accept.
    public func error(_ message: String) -> JSONReaderError {
        error(message, at: index)
    }

    // MARK: Internals

    /// Set right after `{` or `[`: the first member or element takes no comma.
    private var objectStart = false

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func open(_ byte: UInt8, _ what: String) throws(JSONReaderError) {
        skipWhitespace()
        guard peek == byte else { throw error("expected \(what)") }
        guard depth < Self.maximumDepth else { throw error("nested deeper than \(Self.maximumDepth) levels") }
        depth += 1
        index += 1
    }

    /// Consumes the container's end (returning true) or the separator before its next entry.
    private mutating func closes(_ end: UInt8) throws(JSONReaderError) -> Bool {
        if peek == end {
            index += 1
            depth -= 1
            objectStart = false
            return true
        }
        if objectStart {
            objectStart = false
            return false
        }
        guard peek == UInt8(ascii: ",") else { throw error("expected ',' or '\(Character(Unicode.Scalar(end)))'") }
        index += 1
        skipWhitespace()
        // A trailing comma is not JSON.
        if peek == end { throw error("a trailing comma") }
        return false
    }

    private mutating func word(_ literal: StaticString) throws(JSONReaderError) {
        let count = literal.utf8CodeUnitCount
        let matches = literal.withUTF8Buffer { expected in
            index + count <= bytes.count && bytes[index..<index + count].elementsEqual(expected)
        }
        guard matches else { throw error("expected \(literal)") }
        index += count
    }

    /// The range of a number's text (RFC 8259 grammar), and whether it has neither fraction nor exponent.
    private mutating func number() throws(JSONReaderError) -> (Range<Int>, Bool) {
        skipWhitespace()
        let start = index
        if peek == UInt8(ascii: "-") { index += 1 }
        guard let first = peek, first >= 0x30, first <= 0x39 else { throw error("expected a value", at: start) }
        index += 1
        if first == 0x30, let next = peek, next >= 0x30, next <= 0x39 { throw error("a number with a leading zero", at: start) }
        skipDigits()
        var isInteger = true
        if peek == UInt8(ascii: ".") {
            index += 1
            guard try skipRequiredDigits() else { throw error("a number without digits after '.'", at: start) }
            isInteger = false
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard try skipRequiredDigits() else { throw error("a number without exponent digits", at: start) }
            isInteger = false
        }
        guard index - start <= 64 else { throw error("a number longer than 64 characters", at: start) }
        return (start..<index, isInteger)
    }

    private mutating func skipDigits() {
        while let byte = peek, byte >= 0x30, byte <= 0x39 { index += 1 }
    }

    private mutating func skipRequiredDigits() throws(JSONReaderError) -> Bool {
        let start = index
        skipDigits()
        return index > start
    }

    private func text(_ range: Range<Int>) throws(JSONReaderError) -> String {
        guard let text = bytes.withUnsafeBufferPointer({ String(validating: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }) else {
            throw error("a string that is not valid UTF-8", at: range.lowerBound)
        }
        return text
    }

    /// The slow path, from the string's first byte once a backslash is seen.
    private mutating func escapedString(from start: Int) throws(JSONReaderError) -> String {
        var scratch = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: scratch, as: UTF8.self) else {
                    throw error("a string that is not valid UTF-8", at: start)
                }
                return text
            case UInt8(ascii: "\\"):
                guard let escape = peek else { break }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(escape)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"): try appendUnicodeEscape(to: &scratch)
                default: throw error("an unknown escape '\\\(Character(Unicode.Scalar(escape)))'", at: index - 2)
                }
            case 0..<0x20: throw error("a control character in a string", at: index - 1)
            default: scratch.append(byte)
            }
        }
        throw error("an unterminated string", at: start - 1)
    }

    /// After `\u`: four hex digits, and a second escape when they are a high surrogate.
    private mutating func appendUnicodeEscape(to scratch: inout [UInt8]) throws(JSONReaderError) {
        let start = index - 2
        var scalar = try hex4()
        if (0xD800..<0xDC00).contains(scalar) {
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("a high surrogate without its low half", at: start)
            }
            index += 2
            let low = try hex4()
            guard (0xDC00..<0xE000).contains(low) else { throw error("a high surrogate without its low half", at: start) }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        }
        guard let character = Unicode.Scalar(scalar) else { throw error("a lone surrogate escape", at: start) }
        scratch.append(contentsOf: String(character).utf8)
    }

    private mutating func hex4() throws(JSONReaderError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("a \\u escape without four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw error("a \\u escape without four hex digits")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private func error(_ message: String, at offset: Int) -> JSONReaderError {
        // Line and column are counted only now: the error path is the rare one.
        var line = 1, column = 1
        for byte in bytes[..<min(offset, bytes.count)] {
            if byte == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        return JSONReaderError(message: message, offset: offset, line: line, column: column)
    }
}

/// The kinds of JSON value, as `JSONReader.nextValueKind()` names the next one.
public enum JSONValueKind: Sendable, Hashable {
    case object, array, string, number, bool, null
}

/// A document `JSONReader` refused, with where: byte offset, and line and column (1-based).
public struct JSONReaderError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public var message: String
    /// The byte offset of the problem.
    public var offset: Int
    /// The line of the problem, from 1.
    public var line: Int
    /// The column of the problem, from 1, in bytes.
    public var column: Int
    /// The error that caused this one, when another library or package raised it first; kept as a
    /// value so a caller can inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `underlying` is the error that caused it, if any.
    public init(message: String, offset: Int, line: Int, column: Int, underlying: (any Error & Sendable)? = nil) {
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: JSONReaderError, rhs: JSONReaderError) -> Bool {
        lhs.message == rhs.message && lhs.offset == rhs.offset && lhs.line == rhs.line && lhs.column == rhs.column
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(message)
        hasher.combine(offset)
        hasher.combine(line)
        hasher.combine(column)
    }

    /// Where and what, as one line.
    public var description: String { "line \(line), column \(column): \(message)" }
}
