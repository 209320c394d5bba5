import Foundation
import OutpostSchema

/// One measurement on a sheet: a labelled quantity in a unit (`320` `sq ft` of "North wall").
public struct Measure: Syncable {
    public static let entityType = EntityType.measure
    public var id: UUID
    public var sync: SyncMetadata
    public var measureSheetID: UUID
    public var label: String
    public var quantity: Double
    public var unit: String
    public var sortOrder: Int

    /// Creates a measure.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        measureSheetID: UUID, label: String, quantity: Double, unit: String, sortOrder: Int = 0
    ) {
        self.id = id
        self.sync = sync
        self.measureSheetID = measureSheetID
        self.label = label
        self.quantity = quantity
        self.unit = unit
        self.sortOrder = sortOrder
    }
}
