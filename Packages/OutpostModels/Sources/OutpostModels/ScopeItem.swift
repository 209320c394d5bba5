import Foundation
import OutpostSchema

/// A priced line of a scope: quantity × unit price, optionally taken from a measure.
public struct ScopeItem: Syncable {
    public static let entityType = EntityType.scopeItem
    public var id: UUID
    public var sync: SyncMetadata
    public var scopeID: UUID
    /// The measure the quantity comes from, if any.
    public var measureID: UUID?
    public var name: String
    public var quantity: Double
    public var unit: String
    public var unitPriceCents: Int64
    public var sortOrder: Int

    /// Creates a scope item.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        scopeID: UUID, measureID: UUID? = nil, name: String, quantity: Double, unit: String,
        unitPriceCents: Int64, sortOrder: Int = 0
    ) {
        self.id = id
        self.sync = sync
        self.scopeID = scopeID
        self.measureID = measureID
        self.name = name
        self.quantity = quantity
        self.unit = unit
        self.unitPriceCents = unitPriceCents
        self.sortOrder = sortOrder
    }
}
