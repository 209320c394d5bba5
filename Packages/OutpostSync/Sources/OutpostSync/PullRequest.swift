import Foundation

/// Asks for the changes after a cursor, one bounded page at a time, so a device catches up
/// incrementally and saves its cursor only after a page is applied.
public struct PullRequest: Sendable, Hashable, Codable {
    /// The `nextCursor` of the last applied page; nil to start from the beginning.
    public var cursor: String?
    /// The most changes to return; the server may return fewer (it caps at its `maximumPullLimit`).
    public var limit: Int
    /// Only these projects' records; nil for every project the caller belongs to.
    public var projects: [UUID]?

    /// Creates a request.
    public init(cursor: String?, limit: Int, projects: [UUID]? = nil) {
        self.cursor = cursor
        self.limit = limit
        self.projects = projects
    }
}
