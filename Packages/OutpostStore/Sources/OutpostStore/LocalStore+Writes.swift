import Foundation
import GRDB
import OutpostSchema

extension LocalStore {
    /// Creates or updates `value` after checking the catalog's rules; returns it as stored (pending,
    /// with its timestamps). Only the fields that differ from the stored row are queued for the server.
    ///
    /// `value.sync.version` says which version of the record the caller read. When a pull has brought a
    /// newer one since, only the fields the caller changed are written: a field the caller merely holds
    /// an older value of keeps the stored, newer value (see `StaleCopy` and the package README), and the value
    /// returned then differs from `value` in those fields.
    @discardableResult
    public func save<Model: Syncable>(_ value: Model, now: Date = Timestamp.now()) async throws(StoreError) -> Model {
        let record = value.record
        let written = try await save(record, now: now)
        // Usually the store changes only the sync bookkeeping, and the fields come back as given.
        guard written.fields != record.fields else {
            var saved = value
            saved.sync = written.sync
            return saved
        }
        return try StoreError.mapping(path: path) { try Model(record: written) }
    }

    /// The record-level form of `save`, for code that works on any entity.
    @discardableResult
    public func save(_ record: EntityRecord, now: Date = Timestamp.now()) async throws(StoreError) -> EntityRecord {
        try await save(record, now: now, alongside: nil)
    }

    func save(
        _ record: EntityRecord, now: Date, alongside: (@Sendable (Database) throws -> Void)?
    ) async throws(StoreError) -> EntityRecord {
        if let invalid = record.validationErrors.first {
            throw StoreError(.invalidRecord, path: path, message: invalid.description, modelError: invalid)
        }
        let (written, operation) = try await StoreError.mapping(path: path) { try await self.writer.save(record, in: self.pool, now: now, alongside: alongside) }
        if let operation { observers.publish(StoreChange(entity: record.entity, recordID: record.id, operation: operation)) }
        return written
    }

    /// Deletes the record (a tombstone that syncs). Returns false when there was nothing to delete.
    @discardableResult
    public func delete(_ entity: EntityType, id: UUID, now: Date = Timestamp.now()) async throws(StoreError) -> Bool {
        let deleted = try await StoreError.mapping(path: path) { try await self.writer.delete(entity, id: id, in: self.pool, now: now) }
        guard deleted != nil else { return false }
        observers.publish(StoreChange(entity: entity, recordID: id, operation: .delete))
        return true
    }
}
