import Foundation

/// One instant of a hybrid logical clock: wall-clock milliseconds, a counter for events within the
/// same millisecond, and the node that stamped it. Totally ordered in that order, so every replica
/// agrees which of two writes is newer, and ties between nodes resolve the same way everywhere.
public struct HybridTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The largest physical time the encoding holds (48 bits of milliseconds, past the year 10,000).
    public static let maximumPhysicalMilliseconds: Int64 = (1 << 48) - 1

    /// Milliseconds since 1970 in UTC, never below the physical time of anything the node has seen.
    public let physicalMilliseconds: Int64
    /// Orders events that share a millisecond, and keeps the clock moving when the wall clock stalls or jumps back.
    public let counter: UInt16
    /// The node that stamped this instant; the last tie-break.
    public let node: NodeID

    /// Creates a timestamp; `physicalMilliseconds` must lie within `0...maximumPhysicalMilliseconds`.
    public init(physicalMilliseconds: Int64, counter: UInt16, node: NodeID) {
        precondition(
            (0...Self.maximumPhysicalMilliseconds).contains(physicalMilliseconds),
            "physical time \(physicalMilliseconds) ms lies outside 0...\(Self.maximumPhysicalMilliseconds)")
        self.physicalMilliseconds = physicalMilliseconds
        self.counter = counter
        self.node = node
    }

    /// Parses the fixed-width text `encoded` produces, refusing anything else (including upper-case
    /// hex, which would sort differently).
    public init(encoded text: String) throws(ConflictError) {
        try self.init(encodedUTF8: ArraySlice(text.utf8))
    }

    /// `init(encoded:)` on the text's UTF-8 bytes, for readers that hold them already: a pulled record
    /// carries a clock per field, and building a `String` for each only to parse it cost a pull dearly.
    public init(encodedUTF8 bytes: ArraySlice<UInt8>) throws(ConflictError) {
        let start = bytes.startIndex
        guard bytes.count == Self.encodedLength else {
            throw Self.invalid(bytes, "has \(bytes.count) bytes, expected \(Self.encodedLength)")
        }
        guard bytes[start + 12] == UInt8(ascii: "-"), bytes[start + 17] == UInt8(ascii: "-") else {
            throw Self.invalid(bytes, "expected '-' after the 12 time digits and after the 4 counter digits")
        }
        guard let physical = Hex.parse(bytes[start..<start + 12]), let counter = Hex.parse(bytes[start + 13..<start + 17]),
            let node = Hex.parse(bytes[(start + 18)...])
        else {
            throw Self.invalid(bytes, "expected lowercase hex digits only, as in 0194f3a2b1c0-0000-00000000000000a1")
        }
        self.init(physicalMilliseconds: Int64(physical), counter: UInt16(counter), node: NodeID(node))
    }

    /// Fixed-width lowercase hex, `pppppppppppp-cccc-nnnnnnnnnnnnnnnn`: compact to store and send, and
    /// its byte order equals the clock order, so a database index or a plain string sort orders writes.
    public var encoded: String {
        // Written into one buffer: this runs for every field of every record a pull stores.
        String(unsafeUninitializedCapacity: Self.encodedLength) { buffer in
            Hex.write(UInt64(physicalMilliseconds), digits: 12, into: buffer, at: 0)
            buffer[12] = UInt8(ascii: "-")
            Hex.write(UInt64(counter), digits: 4, into: buffer, at: 13)
            buffer[17] = UInt8(ascii: "-")
            Hex.write(node.rawValue, digits: 16, into: buffer, at: 18)
            return Self.encodedLength
        }
    }

    /// The physical part as a date, for `updatedAt` and `deletedAt` bookkeeping.
    public var date: Date { Date(timeIntervalSince1970: Double(physicalMilliseconds) / 1000) }

    /// The stamp right after this one, stamped by `node`: the next counter, or the next millisecond once
    /// the counter is full, which keeps a clock monotonic at the price of running a millisecond ahead.
    ///
    /// At the last instant the encoding holds there is no next one, and the stamp stays there: only a
    /// hostile or broken server's clock gets there (an honest one refuses clocks more than five minutes
    /// ahead of its time), and stepping past it trapped, so every save of that record and every sync
    /// crashed the app (attack 61, finding 1). A write stamped there does not beat that clock.
    public func successor(on node: NodeID) -> HybridTimestamp {
        if counter == .max {
            guard physicalMilliseconds < Self.maximumPhysicalMilliseconds else {
                return HybridTimestamp(physicalMilliseconds: physicalMilliseconds, counter: counter, node: node)
            }
            return HybridTimestamp(physicalMilliseconds: physicalMilliseconds + 1, counter: 0, node: node)
        }
        return HybridTimestamp(physicalMilliseconds: physicalMilliseconds, counter: counter + 1, node: node)
    }

    public var description: String { encoded }

    public static func < (lhs: HybridTimestamp, rhs: HybridTimestamp) -> Bool {
        if lhs.physicalMilliseconds != rhs.physicalMilliseconds {
            return lhs.physicalMilliseconds < rhs.physicalMilliseconds
        }
        if lhs.counter != rhs.counter { return lhs.counter < rhs.counter }
        return lhs.node < rhs.node
    }

    static let encodedLength = 12 + 1 + 4 + 1 + 16

    private static func invalid(_ bytes: ArraySlice<UInt8>, _ problem: String) -> ConflictError {
        let text = String(decoding: bytes, as: UTF8.self)
        let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
        return ConflictError(.invalidClockEncoding, message: "'\(shown)' is not a hybrid timestamp: \(problem)")
    }
}

extension HybridTimestamp: Codable {
    // Travels as its encoded text, the same form the store keeps.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            try self.init(encoded: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(encoded)
    }
}
