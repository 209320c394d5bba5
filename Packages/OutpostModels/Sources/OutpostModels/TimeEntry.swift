import Foundation
import OutpostSchema

/// A clock-in or clock-out at a jobsite. The two are separate records so each can be written the
/// moment it happens, offline; a clock-out names its clock-in by client id, and that pairing holds
/// until the server has assigned final ids to both.
public struct TimeEntry: Syncable {
    /// Which end of a shift this entry records.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case clockIn, clockOut
    }

    public static let entityType = EntityType.timeEntry
    public var id: UUID
    public var sync: SyncMetadata
    /// The jobsite's project.
    public var projectID: UUID
    /// The crew member who clocked in or out.
    public var memberID: UUID
    public var kind: Kind
    /// When it happened, by the device that saw it.
    public var recordedAt: Date
    /// For a clock-out: the clock-in it closes.
    public var clockInID: UUID?
    public var latitude: Double?
    public var longitude: Double?
    public var note: String

    /// Creates a time entry; a clock-out should name its clock-in.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, memberID: UUID, kind: Kind, recordedAt: Date, clockInID: UUID? = nil,
        latitude: Double? = nil, longitude: Double? = nil, note: String = ""
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.memberID = memberID
        self.kind = kind
        self.recordedAt = recordedAt
        self.clockInID = clockInID
        self.latitude = latitude
        self.longitude = longitude
        self.note = note
    }
}
