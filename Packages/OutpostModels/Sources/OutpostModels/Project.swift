import Foundation
import OutpostSchema

/// A job at one site: crews clock in to it, and its scopes make up the estimate.
public struct Project: Syncable {
    /// Where the job stands.
    public enum Status: String, Sendable, Hashable, Codable, CaseIterable {
        case planned, active, onHold, completed, cancelled
    }

    public static let entityType = EntityType.project
    public var id: UUID
    public var sync: SyncMetadata
    /// The opportunity the project was won from, if any.
    public var opportunityID: UUID?
    public var name: String
    /// The office's job number.
    public var number: String?
    public var address: String
    public var status: Status
    /// The planned first day on site, `YYYY-MM-DD`.
    public var startDay: String?

    /// Creates a project.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        opportunityID: UUID? = nil, name: String, number: String? = nil, address: String = "",
        status: Status = .planned, startDay: String? = nil
    ) {
        self.id = id
        self.sync = sync
        self.opportunityID = opportunityID
        self.name = name
        self.number = number
        self.address = address
        self.status = status
        self.startDay = startDay
    }
}
