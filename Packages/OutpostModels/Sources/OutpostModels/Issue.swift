import Foundation
import OutpostSchema

/// A problem raised on site, with where it is and what it concerns.
public struct Issue: Syncable {
    /// Where the issue stands in its workflow.
    public enum Status: String, Sendable, Hashable, Codable, CaseIterable {
        case open, inProgress, resolved, closed
    }

    /// How urgently it needs attention.
    public enum Priority: String, Sendable, Hashable, Codable, CaseIterable {
        case low, medium, high, critical
    }

    public static let entityType = EntityType.issue
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var title: String
    public var details: String
    public var status: Status
    public var priority: Priority
    /// The member who should act on it.
    public var assigneeID: UUID?
    /// GPS position where it was raised; both or neither.
    public var latitude: Double?
    public var longitude: Double?
    /// The asset it concerns (found by scanning its QR tag).
    public var assetID: UUID?
    /// The element of the building model it concerns, as the model names it.
    public var modelElementID: String?

    /// Creates an issue.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, title: String, details: String = "", status: Status = .open,
        priority: Priority = .medium, assigneeID: UUID? = nil, latitude: Double? = nil,
        longitude: Double? = nil, assetID: UUID? = nil, modelElementID: String? = nil
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.title = title
        self.details = details
        self.status = status
        self.priority = priority
        self.assigneeID = assigneeID
        self.latitude = latitude
        self.longitude = longitude
        self.assetID = assetID
        self.modelElementID = modelElementID
    }

    /// True when the project or asset it belongs to was deleted meanwhile: kept for the user to relink or close.
    public var isOrphaned: Bool { sync.isOrphaned }
}
