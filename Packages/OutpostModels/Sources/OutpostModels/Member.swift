import Foundation
import OutpostSchema

/// A person's membership of a project, with the role that decides what they may do there.
public struct Member: Syncable {
    /// What the member does on the project.
    public enum Role: String, Sendable, Hashable, Codable, CaseIterable {
        case owner, projectManager, estimator, foreman, crew, viewer
    }

    public static let entityType = EntityType.member
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    /// The person's account, the same across projects.
    public var userID: UUID
    public var name: String
    public var email: String
    public var role: Role

    /// Creates a membership.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, userID: UUID, name: String, email: String = "", role: Role
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.userID = userID
        self.name = name
        self.email = email
        self.role = role
    }
}
