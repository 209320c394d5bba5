/// The server's answer to a push: one result per mutation, in the order sent.
public struct PushResponse: Sendable, Hashable, Codable {
    /// One result per mutation of the request, in the same order.
    public var results: [MutationResult]
    /// Where the server's history stands after this push (opaque text): sent with the next request
    /// (`PushRequest.checkpoint`, `PullRequest.checkpoint`), it tells a server restored from a backup
    /// taken before this push apart from the one that took it. Absent from older servers.
    public var checkpoint: String?

    /// Creates a response.
    public init(results: [MutationResult], checkpoint: String? = nil) {
        self.results = results
        self.checkpoint = checkpoint
    }
}
