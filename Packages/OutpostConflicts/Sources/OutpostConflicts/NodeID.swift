import Foundation

/// The replica that stamped a clock. It breaks ties between equal times, so every replica orders
/// concurrent writes the same way.
public struct NodeID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The identifier; 64 bits keep a hybrid timestamp compact while collisions stay negligible.
    public let rawValue: UInt64

    /// Wraps a raw identifier, such as one the server assigned to the device.
    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Derives a node from a device or server UUID (its first 64 bits), so no registry of nodes is needed.
    public init(uuid: UUID) {
        let bytes = uuid.uuid
        let first: [UInt8] = [bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5, bytes.6, bytes.7]
        rawValue = first.reduce(0) { $0 << 8 | UInt64($1) }
    }

    public static func < (lhs: NodeID, rhs: NodeID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Sixteen lowercase hex digits, as in the timestamp's encoding.
    public var description: String { Hex.fixed(rawValue, digits: 16) }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(UInt64.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
