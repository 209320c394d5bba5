import Foundation

/// A typed model of one entity, convertible to and from the generic `EntityRecord` form.
///
/// Conformers are plain structs whose stored properties are exactly `id`, `sync` and the fields the
/// catalog lists for `entityType`; `fieldTable` lists those fields as key paths, which is how values are
/// converted to records and rows and back without reflection or `Codable`.
public protocol Syncable: Codable, Sendable, Hashable, Identifiable where ID == UUID {
    /// The entity this type models.
    static var entityType: EntityType { get }
    /// The client-generated id, stable for the record's whole life (settable so rows can be decoded).
    var id: UUID { get set }
    /// Sync bookkeeping: server id, version, timestamps, tombstone, status.
    var sync: SyncMetadata { get set }
    /// The catalog's fields of this model as key paths, in catalog order.
    static var fieldTable: FieldTable<Self> { get }
}

extension Syncable {
    /// What is wrong with the model's field table against the schema in use, naming the field; nil when
    /// it matches (`EntityCatalog.install` checks every model with it).
    static var fieldTableProblem: (field: String?, message: String)? { fieldTable.problem }

    /// The record form of this value, with every catalog field present (null where optional and absent).
    public var record: EntityRecord {
        EntityRecord(entity: Self.entityType, id: id, fields: catalogFields, sync: sync)
    }

    /// Converts a record back to the typed model, refusing a record of another entity, with missing,
    /// unknown or mistyped fields, or with a value outside a choice field's list.
    public init(record: EntityRecord) throws(ModelError) {
        guard record.entity == Self.entityType else {
            throw ModelError(
                .wrongEntity, entity: Self.entityType, id: record.id,
                message: "expected a \(Self.entityType.rawValue) record, got a \(record.entity.rawValue) record")
        }
        if let shapeError = record.shapeErrors().first { throw shapeError }
        let names = Self.fieldTable.names
        do {
            try self.init(id: record.id, sync: record.sync) { record[names[$0]] }
        } catch let error as ModelError {
            throw error
        } catch {
            throw ModelError(.typeMismatch, entity: record.entity, id: record.id, message: "\(error)", underlying: error)
        }
    }

    /// Every rule this value breaks, in catalog order; empty when it is valid.
    public var validationErrors: [ModelError] { record.validationErrors }

    /// Throws the first rule this value breaks.
    public func validate() throws(ModelError) {
        try record.validate()
    }
}
