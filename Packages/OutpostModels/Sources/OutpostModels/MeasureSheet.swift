import Foundation
import OutpostSchema

/// The measurements taken for one scope on a site visit.
public struct MeasureSheet: Syncable {
    public static let entityType = EntityType.measureSheet
    public var id: UUID
    public var sync: SyncMetadata
    public var scopeID: UUID
    public var name: String
    public var notes: String

    /// Creates a measure sheet.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        scopeID: UUID, name: String, notes: String = ""
    ) {
        self.id = id
        self.sync = sync
        self.scopeID = scopeID
        self.name = name
        self.notes = notes
    }
}
