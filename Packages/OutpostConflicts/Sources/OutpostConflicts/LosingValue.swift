import OutpostSchema

/// A field value that did not make it into the merged record, kept so the store can surface it and
/// the user can bring it back: no user data is silently dropped.
public struct LosingValue: Sendable, Hashable {
    /// The field.
    public let field: String
    /// The value that lost.
    public let value: FieldValue
    /// When it was written.
    public let clock: HybridTimestamp
    /// Whose version it came from.
    public let side: Side

    /// Describes a losing value, as a store reloads it to resolve a surfaced conflict.
    public init(field: String, value: FieldValue, clock: HybridTimestamp, side: Side) {
        self.field = field
        self.value = value
        self.clock = clock
        self.side = side
    }
}
