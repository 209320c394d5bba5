import Foundation
import OutpostSchema

/// A remark on an issue; immutable once posted, so comments never conflict.
public struct Comment: Syncable {
    public static let entityType = EntityType.comment
    public var id: UUID
    public var sync: SyncMetadata
    public var issueID: UUID
    public var authorID: UUID
    public var body: String

    /// Creates a comment.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        issueID: UUID, authorID: UUID, body: String
    ) {
        self.id = id
        self.sync = sync
        self.issueID = issueID
        self.authorID = authorID
        self.body = body
    }
}
