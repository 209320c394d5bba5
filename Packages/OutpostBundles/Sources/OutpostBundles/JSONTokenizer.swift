import Foundation
import OutpostSchema

/// The streaming front end of the one JSON scanning core: it reads a bundle through a 64 KiB buffer
/// (Foundation's `JSONDecoder` needs the whole document as objects, above 3 GB for a 1,000,000-record
/// bundle, and no streaming JSON library is among the workspace's dependencies), tracks line and
/// column, and frames one value at a time: a record, a file reference, a key. Each framed value is
/// scanned by `OutpostModels.JSONReader`, the same core the wire's whole-buffer reads use, so strings,
/// escapes, UTF-8, numbers and literals have one implementation. Framing follows only strings' ends and
/// containers' nesting, and bounds nesting, value size, string length and members per object or
/// array, so hostile input can cost neither memory nor stack.
final class JSONTokenizer {
    private let input: DocumentInput
    private let limits: BundleLimits
    private var buffer: [UInt8]
    private var position = 0
    private var count = 0
    /// The bytes of the value being framed.
    private var framed: [UInt8] = []
    /// Whether the document's first bytes were read (a byte-order mark is skipped there only).
    private var begun = false
    /// The 1-based line and column of the next unread byte.
    private(set) var line = 1
    private(set) var column = 1
    /// Where errors say they are; the reader keeps the JSON path.
    var locate: (BundleError) -> BundleError = { $0 }

    var bytesRead: Int64 { input.bytesRead }

    /// The most bytes one framed value may take: a record at its limits (its strings escaped at worst
    /// six bytes a character) with room for its structure.
    private var maximumValueBytes: Int { limits.maximumStringBytes * 6 + 64 * 1024 }

    init(input: DocumentInput, limits: BundleLimits) {
        self.input = input
        self.limits = limits
        buffer = [UInt8](repeating: 0, count: 64 * 1024)
    }

    // MARK: Bytes

    /// The next byte after white space, without consuming it; nil at the end of the document. A run of
    /// white space longer than a value may be is refused: it is no value, and unbounded, a server's
    /// endless run of it (or gzip of it, a thousandfold) had a pre-sync read and write gigabytes
    /// (attack 92, finding 1). Within a value, white space counts toward the value's own bound.
    func peekSignificant() throws(BundleError) -> UInt8? {
        var run = 0
        while let byte = try peek() {
            switch byte {
            case 0x20, 0x09, 0x0D: advance()
            case 0x0A:
                position += 1
                line += 1
                column = 1
            default: return byte
            }
            run += 1
            if run > maximumValueBytes {
                throw locate(BundleError(
                    .limitExceeded, message: "a run of white space is longer than \(maximumValueBytes) bytes, the most a value may take",
                    line: line, column: column))
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
                throw locate(input.failed ? input.failure
                    : BundleError(.unreadableFile, message: "the document could not be read", file: input.path))
            }
            position = 0
            count = read
            if read == 0 { return nil }
            // A UTF-8 byte-order mark before the document, which some editors write: skipped, as the XML
            // reader skips one (RFC 8259 lets a parser ignore it). Refused, a bundle that crossed such a
            // tool imported as XML and not as JSON (attack 128).
            if !begun, read >= 3, buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF { position = 3 }
            begun = true
            if position == count { return try peek() }
        }
        return buffer[position]
    }

    private func advance() {
        position += 1
        column += 1
    }

    // MARK: Values

    /// A string (the opening quote comes next, after white space), unescaped and checked as UTF-8.
    func readString() throws(BundleError) -> String {
        guard try peekSignificant() == 0x22 else { throw syntaxError("expected a string") }
        guard case .string(let text) = try readValue(depth: 0) else { throw syntaxError("expected a string") }
        return text
    }

    /// A whole value, for the small parts of a bundle (one record, one file reference), `depth` levels
    /// below the document.
    func readValue(depth: Int) throws(BundleError) -> JSONValue {
        let (startLine, startColumn) = try frameValue(depth: depth)
        var reader = JSONReader(bytes: framed)
        do {
            let value = try JSONValue(reading: &reader, limits: limits)
            try reader.expectEnd()
            return value
        } catch let error as JSONReaderError {
            // Where in the document: the framed value's first byte, then the core's line and column in it.
            let errorLine = startLine + error.line - 1
            let errorColumn = error.line == 1 ? startColumn + error.column - 1 : error.column
            throw locate(BundleError(.malformedJSON, message: error.message, line: errorLine, column: errorColumn, underlying: error))
        } catch let error as JSONValue.LimitError {
            throw locate(BundleError(.limitExceeded, message: error.message, line: startLine, column: startColumn))
        } catch {
            throw locate(BundleError(.malformedJSON, message: "\(error)", line: startLine, column: startColumn, underlying: error))
        }
    }

    /// Copies the next value's bytes into `framed` and returns where it starts. Only what it takes to
    /// find the value's end is read here: a string's closing quote (past escaped ones, and a `\\u`
    /// escape's four hex digits) and the nesting of containers, which is bounded; a scalar ends at the
    /// first byte that cannot continue it. The buffer is scanned a run at a time and each run appended
    /// whole, so this pass costs little beside the core's scan of the same bytes.
    private func frameValue(depth: Int) throws(BundleError) -> (line: Int, column: Int) {
        guard try peekSignificant() != nil else { throw syntaxError("the document ends where a value belongs") }
        let startLine = line, startColumn = column
        framed.removeAll(keepingCapacity: true)
        var state = FrameState()
        while true {
            guard try peek() != nil else {
                if state.inString { throw syntaxError("the document ends inside a string") }
                if state.nesting > 0 { throw syntaxError("the document ends inside a value") }
                return (startLine, startColumn)
            }
            let runStart = position
            var index = position
            var outcome = FrameState.Outcome.more
            let end = count
            var line = self.line, column = self.column
            buffer.withUnsafeBufferPointer { bytes in
                while index < end {
                    let byte = bytes[index]
                    outcome = state.step(byte, depth: depth, limits: limits)
                    if outcome == .endsBefore || outcome == .tooDeep || outcome == .badEscape { break }
                    if byte == 0x0A {
                        line += 1
                        column = 1
                    } else {
                        column += 1
                    }
                    index += 1
                    if outcome == .ends { break }
                }
            }
            self.line = line
            self.column = column
            framed.append(contentsOf: buffer[runStart..<index])
            position = index
            switch outcome {
            case .more:
                if framed.count > maximumValueBytes {
                    throw locate(BundleError(.limitExceeded, message: "a value is longer than \(maximumValueBytes) bytes",
                        line: line, column: column))
                }
            case .ends, .endsBefore:
                return (startLine, startColumn)
            case .tooDeep:
                throw locate(BundleError(.limitExceeded, message: "values nest deeper than \(limits.maximumDepth) levels",
                    line: line, column: column))
            case .badEscape:
                throw syntaxError("a \\u escape without four hex digits")
            }
        }
    }

    /// Fails unless only white space is left.
    func expectEnd() throws(BundleError) {
        if try peekSignificant() != nil { throw syntaxError("unexpected text after the end of the document") }
    }

    func syntaxError(_ message: String) -> BundleError {
        locate(BundleError(.malformedJSON, message: message, line: line, column: column))
    }
}

/// Where framing stands inside a value: in a string or not, escapes, nesting.
private struct FrameState {
    enum Outcome {
        /// The byte belongs to the value and more follows.
        case more
        /// The byte ends the value (a closing quote or bracket at the top).
        case ends
        /// The value ended before this byte (a scalar meeting a separator), which is not taken.
        case endsBefore
        /// The byte opens a container past the nesting limit.
        case tooDeep
        /// A `\\u` escape met a byte that is not a hex digit: a quote there would end the string early
        /// and frame the rest of the document out of step.
        case badEscape
    }

    var nesting = 0
    var inString = false
    private var escaped = false
    private var hexDigitsOwed = 0

    mutating func step(_ byte: UInt8, depth: Int, limits: BundleLimits) -> Outcome {
        if inString {
            if hexDigitsOwed > 0 {
                guard (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte) else {
                    return .badEscape
                }
                hexDigitsOwed -= 1
            } else if escaped {
                escaped = false
                if byte == 0x75 { hexDigitsOwed = 4 }
            } else if byte == 0x5C {
                escaped = true
            } else if byte == 0x22 {
                inString = false
                return nesting == 0 ? .ends : .more
            }
            return .more
        }
        switch byte {
        case 0x22:
            inString = true
        case 0x7B, 0x5B:
            nesting += 1
            guard depth + nesting <= limits.maximumDepth else { return .tooDeep }
        case 0x7D, 0x5D:
            if nesting == 0 { return .endsBefore }
            nesting -= 1
            if nesting == 0 { return .ends }
        case 0x2C, 0x3A, 0x20, 0x09, 0x0D, 0x0A:
            if nesting == 0 { return .endsBefore }
        default:
            break
        }
        return .more
    }
}

/// A JSON number as written, so an integer is never rounded through a `Double`.
struct JSONNumber: Hashable {
    var text: String
    var isInteger: Bool

    /// The 64-bit integer this number writes, when it is whole: `bundle.schema.json` is JSON Schema
    /// 2020-12, whose `integer` takes `1.0` and `1e2` as well as `1`, and the reader refused them
    /// (attack 124, F4). Read exactly from the digits by the wire's reader (`JSONReader.integer()`); nil
    /// for a number with a fraction or outside 64 bits.
    var wholeValue: Int64? {
        if isInteger { return Int64(text) }
        var reader = JSONReader(bytes: Array(text.utf8))
        return try? reader.integer()
    }
}

/// A small JSON value: one record or one file reference, never the whole document. Not `indirect`:
/// its containers are arrays, already on the heap, and boxing every scalar too was an allocation per
/// value of every record a bundle import read.
enum JSONValue {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// A bundle limit a value broke (`BundleLimits`).
    struct LimitError: Error {
        let message: String
    }

    /// Reads one value with the core (`JSONReader`), keeping the bundle's limits: string length,
    /// members per object or array, and no key twice in one object. Nesting was bounded as the value
    /// was framed (`JSONTokenizer.frameValue`), before any of it was read.
    init(reading reader: inout JSONReader, limits: BundleLimits) throws {
        switch reader.nextValueKind() {
        case .object?:
            try reader.beginObject()
            var members: [(String, JSONValue)] = []
            while let key = try reader.nextKey() {
                guard key.utf8.count <= limits.maximumStringBytes else {
                    throw LimitError(message: "a string is longer than \(limits.maximumStringBytes) bytes of UTF-8 (the schema's maxLength counts characters)")
                }
                let value = try JSONValue(reading: &reader, limits: limits)
                guard !members.contains(where: { $0.0 == key }) else {
                    throw reader.error("the key '\(key)' appears twice in one object")
                }
                members.append((key, value))
                try Self.check(members.count, limits)
            }
            self = .object(members)
        case .array?:
            try reader.beginArray()
            var elements: [JSONValue] = []
            while try reader.nextElement() {
                elements.append(try JSONValue(reading: &reader, limits: limits))
                try Self.check(elements.count, limits)
            }
            self = .array(elements)
        case .string?:
            let text = try reader.string()
            guard text.utf8.count <= limits.maximumStringBytes else {
                throw LimitError(message: "a string is longer than \(limits.maximumStringBytes) bytes of UTF-8 (the schema's maxLength counts characters)")
            }
            self = .string(text)
        case .bool?:
            self = .bool(try reader.bool())
        case .null?:
            _ = try reader.takeNull()
            self = .null
        case .number?:
            let (text, isInteger) = try reader.numberText()
            self = .number(JSONNumber(text: text, isInteger: isInteger))
        case nil:
            throw reader.error("expected a value")
        }
    }

    private static func check(_ count: Int, _ limits: BundleLimits) throws {
        guard count <= limits.maximumObjectMembers else {
            throw LimitError(
                message: "an object or array inside a record has more than \(limits.maximumObjectMembers) members")
        }
    }

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
