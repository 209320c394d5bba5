import Foundation
import GRDB
import OutpostModels

extension LocalStore {
    /// Creates or updates `value` after checking the catalog's rules; returns it as stored (pending,
    /// with its timestamps). Only the fields that differ from the stored row are queued for the server.
    @discardableResult
    public func save<Model: Syncable>(_ value: Model, now: Date = Timestamp.now()) async throws(StoreError) -> Model {
        // The store changes only the sync bookkeeping; the fields come back exactly as given.
        var saved = value
        saved.sync = try await save(value.record, now: now).sync
        return saved
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
        observers.publish(StoreChange(entity: record.entity, recordID: record.id, operation: operation))
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
