import Foundation
import OutpostSchema

/// A way for the customer to pay over time, offered with the estimate.
public struct FinanceOption: Syncable {
    public static let entityType = EntityType.financeOption
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var lender: String
    public var termMonths: Int
    /// Annual percentage rate in basis points: 799 is 7.99 %.
    public var aprBasisPoints: Int
    public var downPaymentCents: Int64

    /// Creates a finance option.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, lender: String, termMonths: Int, aprBasisPoints: Int, downPaymentCents: Int64 = 0
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.lender = lender
        self.termMonths = termMonths
        self.aprBasisPoints = aprBasisPoints
        self.downPaymentCents = downPaymentCents
    }
}
