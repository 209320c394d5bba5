import Foundation
import OutpostSchema

/// A discount on a project's estimate: a percentage in basis points, or a fixed amount in cents.
public struct Discount: Syncable {
    /// How `value` is read.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// `value` is basis points: 1,000 is 10 %.
        case percentage
        /// `value` is cents.
        case fixedAmount
    }

    public static let entityType = EntityType.discount
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var name: String
    public var kind: Kind
    /// Basis points or cents, as `kind` says.
    public var value: Int64

    /// Creates a discount.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, name: String, kind: Kind, value: Int64
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.name = name
        self.kind = kind
        self.value = value
    }
}
