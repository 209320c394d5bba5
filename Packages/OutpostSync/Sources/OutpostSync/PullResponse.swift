/// One page of changes in server sequence order, tombstones included.
public struct PullResponse: Sendable, Hashable, Codable {
    /// Changed records, each once with its latest state, ordered by `sequence`.
    public var changes: [ServerRecord]
    /// The cursor to save once this page is applied, and to send for the next page. Opaque text.
    public var nextCursor: String
    /// Whether more changes wait after this page.
    public var hasMore: Bool

    /// Creates a page.
    public init(changes: [ServerRecord], nextCursor: String, hasMore: Bool) {
        self.changes = changes
        self.nextCursor = nextCursor
        self.hasMore = hasMore
    }
}
