import Foundation
import OutpostSchema

/// A part of a project's estimate (roof, kitchen, windows) holding measure sheets and priced items.
public struct Scope: Syncable {
    public static let entityType = EntityType.scope
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var name: String
    public var notes: String
    /// Position among the project's scopes.
    public var sortOrder: Int

    /// Creates a scope.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, name: String, notes: String = "", sortOrder: Int = 0
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.name = name
        self.notes = notes
        self.sortOrder = sortOrder
    }
}
