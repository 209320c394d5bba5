import Foundation
import OutpostSchema

/// A charge added to an estimate (permit, disposal, travel).
public struct Fee: Syncable {
    public static let entityType = EntityType.fee
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var name: String
    public var amountCents: Int64
    public var isTaxable: Bool

    /// Creates a fee.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, name: String, amountCents: Int64, isTaxable: Bool = false
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.name = name
        self.amountCents = amountCents
        self.isTaxable = isTaxable
    }
}
