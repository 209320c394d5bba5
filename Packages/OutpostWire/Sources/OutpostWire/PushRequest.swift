/// A batch of mutations sent in one request; the server answers each one separately, so one
/// refused mutation never fails the others.
public struct PushRequest: Sendable, Hashable, Codable {
    /// The mutations, in queue order (parents before children).
    public var mutations: [PushMutation]
    /// The last `checkpoint` the server gave this device: a server whose history no longer holds it
    /// (restored from a backup) answers 409 `history_changed` and applies nothing, so a change made on
    /// a version the server lost is not judged against a history it never saw. Nil before any.
    public var checkpoint: String?

    /// Creates a batch; keep it within the server's `HealthResponse.maximumBatchSize`.
    public init(mutations: [PushMutation], checkpoint: String? = nil) {
        self.mutations = mutations
        self.checkpoint = checkpoint
    }
}
