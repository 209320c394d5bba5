import Foundation
import OutpostSchema

/// A prospective job for a customer: the root of the estimate graph.
public struct Opportunity: Syncable {
    /// How far the sale has come.
    public enum Stage: String, Sendable, Hashable, Codable, CaseIterable {
        case lead, qualified, proposal, won, lost
    }

    public static let entityType = EntityType.opportunity
    public var id: UUID
    public var sync: SyncMetadata
    public var name: String
    public var customerName: String
    public var address: String
    public var stage: Stage
    /// The expected value in cents.
    public var estimatedValueCents: Int64

    /// Creates an opportunity.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        name: String, customerName: String, address: String = "", stage: Stage = .lead,
        estimatedValueCents: Int64 = 0
    ) {
        self.id = id
        self.sync = sync
        self.name = name
        self.customerName = customerName
        self.address = address
        self.stage = stage
        self.estimatedValueCents = estimatedValueCents
    }
}
