import Foundation

/// A small JSON writer for hot paths that store or send records: it writes the shapes `FieldValue`'s
/// `Codable` form reads (one-key objects, keys sorted) straight into bytes, at a fraction of
/// `JSONEncoder`'s cost, and `JSONDecoder` reads its output back unchanged.
public struct JSONWriter: Sendable {
    /// The UTF-8 written so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// The output as text.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The output as data.
    public var data: Data { Data(bytes) }

    /// Appends `literal` as it is: punctuation, key names, `null`.
    public mutating func raw(_ literal: StaticString) {
        literal.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends text that is already JSON (a stored column, say) as it is.
    public mutating func json(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Appends part of a text that is already JSON (one value of a stored column, say) as it is.
    public mutating func json(_ text: Substring) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Appends bytes that are already JSON (an encoding written earlier) as they are.
    public mutating func json(_ encoded: Data) {
        bytes.append(contentsOf: encoded)
    }

    /// Appends a number.
    public mutating func integer(_ value: Int64) {
        if value >= 0, value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
        } else {
            bytes.append(contentsOf: String(value).utf8)
        }
    }

    /// Appends `true` or `false`.
    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// Appends a quoted string; quotes, backslashes and control characters are escaped (with the short
    /// forms `\n`, `\r`, `\t`, `\b`, `\f` where JSON has one), `/` and non-ASCII are not: byte for byte
    /// what `JSONEncoder` writes with `.withoutEscapingSlashes`.
    public mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                switch byte {
                case UInt8(ascii: "\""): raw(#"\""#)
                case UInt8(ascii: "\\"): raw(#"\\"#)
                case 0x0A: raw(#"\n"#)
                case 0x0D: raw(#"\r"#)
                case 0x09: raw(#"\t"#)
                case 0x08: raw(#"\b"#)
                case 0x0C: raw(#"\f"#)
                default:
                    raw(#"\u00"#)
                    bytes.append(Self.hex[Int(byte >> 4)])
                    bytes.append(Self.hex[Int(byte & 0x0F)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends a field value in its `Codable` form: `null` or `{"kind":value}`. Infinity and NaN have
    /// no JSON form and are refused, as `JSONEncoder` refuses them.
    public mutating func value(_ value: FieldValue) throws(JSONWriterError) {
        switch value {
        case .null:
            raw("null")
        case .bool(let flag):
            raw(#"{"bool":"#)
            bool(flag)
            raw("}")
        case .integer(let number):
            raw(#"{"integer":"#)
            integer(number)
            raw("}")
        case .real(let number):
            guard number.isFinite else { throw JSONWriterError(message: "\(number) has no JSON form") }
            raw(#"{"real":"#)
            bytes.append(contentsOf: number.description.utf8)
            raw("}")
        case .text(let text):
            raw(#"{"text":"#)
            string(text)
            raw("}")
        case .date(let date):
            raw(#"{"date":"#)
            string(Timestamp.string(from: date))
            raw("}")
        case .uuid(let id):
            raw(#"{"uuid":"#)
            string(id.uppercasedText)
            raw("}")
        case .blob(let data):
            raw(#"{"blob":"#)
            string(data.base64EncodedString())
            raw("}")
        }
    }

    /// Appends an object with its keys in sorted order, each value written by `member`.
    ///
    /// Inlinable so that a caller in another module (the server's stored clocks) runs a copy
    /// specialized for its value type: the generic one paid a runtime type lookup per member.
    @inlinable
    public mutating func object<Value, Failure: Error>(
        _ members: [String: Value], _ member: (inout JSONWriter, Value) throws(Failure) -> Void
    ) throws(Failure) {
        raw("{")
        var first = true
        // Sorted as pairs: sorting the keys alone cost a second hash lookup per member.
        for (key, value) in members.sorted(by: { $0.key < $1.key }) {
            if !first { raw(",") }
            first = false
            string(key)
            raw(":")
            try member(&self, value)
        }
        raw("}")
    }

    /// Appends a record's fields as `{"name":value,…}`, keys sorted.
    public mutating func fields(_ fields: [String: FieldValue]) throws(JSONWriterError) {
        try object(fields) { (writer: inout JSONWriter, value: FieldValue) throws(JSONWriterError) in
            try writer.value(value)
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)
}

/// A value `JSONWriter` cannot write (a non-finite number).
public struct JSONWriterError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What could not be written.
    public var message: String
    /// The error that caused this one, when another library or package raised it first; kept as a
    /// value so a caller can inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `underlying` is the error that caused it, if any.
    public init(message: String, underlying: (any Error & Sendable)? = nil) {
        self.message = message
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: JSONWriterError, rhs: JSONWriterError) -> Bool { lhs.message == rhs.message }

    public func hash(into hasher: inout Hasher) { hasher.combine(message) }

    public var description: String { message }
}
