/// A delete that did not stand because the other side's update won; surfaced like a losing value,
/// so the user can still delete the record (override) or keep it (discard).
public struct LosingDeletion: Sendable, Hashable {
    /// When the delete was made.
    public let clock: HybridTimestamp
    /// Whose delete it was.
    public let side: Side

    /// Describes a losing delete, as a store reloads it to resolve a surfaced conflict.
    public init(clock: HybridTimestamp, side: Side) {
        self.clock = clock
        self.side = side
    }
}
