/// The server's answer to a push: one result per mutation, in the order sent.
public struct PushResponse: Sendable, Hashable, Codable {
    /// One result per mutation of the request, in the same order.
    public var results: [MutationResult]
    /// Where the server's history stands after this push (opaque text): sent with the next request
    /// (`PushRequest.checkpoint`, `PullRequest.checkpoint`), it tells a server restored from a backup
    /// taken before this push apart from the one that took it. Absent from older servers.
    public var checkpoint: String?
    /// Of `POST /push/answers`: true while the server still keeps every answer it gave the caller (it
    /// keeps a member's newest 20,000), so a key it leaves out is one it never applied for them. False
    /// once some were let go: a key left out may be one it took. Absent from push answers and older servers.
    public var keepsEveryAnswer: Bool?

    /// Creates a response.
    public init(results: [MutationResult], checkpoint: String? = nil, keepsEveryAnswer: Bool? = nil) {
        self.results = results
        self.checkpoint = checkpoint
        self.keepsEveryAnswer = keepsEveryAnswer
    }
}
