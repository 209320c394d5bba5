import Foundation
import OutpostSchema

/// A piece of equipment or installed item on site, tagged with a QR code crews scan to find it.
public struct Asset: Syncable {
    public static let entityType = EntityType.asset
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var name: String
    /// The payload of the asset's QR tag.
    public var qrCode: String
    public var category: String
    /// Where on site it is.
    public var location: String

    /// Creates an asset.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, name: String, qrCode: String, category: String = "", location: String = ""
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.name = name
        self.qrCode = qrCode
        self.category = category
        self.location = location
    }
}
