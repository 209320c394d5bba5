/// The server's answer to a push: one result per mutation, in the order sent.
public struct PushResponse: Sendable, Hashable, Codable {
    /// One result per mutation of the request, in the same order.
    public var results: [MutationResult]

    /// Creates a response.
    public init(results: [MutationResult]) {
        self.results = results
    }
}
