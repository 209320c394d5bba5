/// A batch of mutations sent in one request; the server answers each one separately, so one
/// refused mutation never fails the others.
public struct PushRequest: Sendable, Hashable, Codable {
    /// The mutations, in queue order (parents before children).
    public var mutations: [PushMutation]

    /// Creates a batch; keep it within the server's `HealthResponse.maximumBatchSize`.
    public init(mutations: [PushMutation]) {
        self.mutations = mutations
    }
}
