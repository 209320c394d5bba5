import Foundation
import OutpostSchema

/// What an import did to one entity's records (or to all of them): the numbers a user checks after a
/// pre-sync, and the ones the idempotency tests assert on.
public struct ImportCounts: Sendable, Hashable, Codable {
    /// Records the store did not have.
    public var inserted = 0
    /// Records the bundle changed.
    public var updated = 0
    /// Records the store already held exactly as the bundle has them.
    public var unchanged = 0
    /// Records with local changes not yet synced, left as they are: the bundle brings nothing newer than
    /// the version they were made on.
    public var skippedLocallyModified = 0
    /// Records with local changes not yet synced that the bundle brings a newer version of: the fields the
    /// device did not change took the bundle's values; the changed ones are kept, and sync settles them
    /// through the entity's conflict policy.
    public var refreshedAroundLocalChanges = 0
    /// Records the store holds at a newer server version than the bundle, left as they are, and records
    /// it never held that a pull told it the server deleted after the bundle's version.
    public var skippedOutdated = 0
    /// Imported records whose parent is in neither the bundle nor the store: kept, and flagged.
    public var orphaned = 0

    /// No records yet.
    public init() {}

    /// Every record the import read.
    public var records: Int { inserted + updated + unchanged + skippedLocallyModified + refreshedAroundLocalChanges + skippedOutdated }

    static func + (lhs: ImportCounts, rhs: ImportCounts) -> ImportCounts {
        var sum = lhs
        sum.inserted += rhs.inserted
        sum.updated += rhs.updated
        sum.unchanged += rhs.unchanged
        sum.skippedLocallyModified += rhs.skippedLocallyModified
        sum.refreshedAroundLocalChanges += rhs.refreshedAroundLocalChanges
        sum.skippedOutdated += rhs.skippedOutdated
        sum.orphaned += rhs.orphaned
        return sum
    }
}

/// The end-of-import report: totals and the same figures per entity.
public struct ImportSummary: Sendable, Hashable, Codable {
    /// The manifest's encoding.
    public var format: String
    /// The project the bundle is for.
    public var projectID: UUID?
    /// Counts over all entities.
    public var total: ImportCounts
    /// Counts per entity name (`issue`, `timeEntry`…), only for entities the bundle holds.
    public var byEntity: [String: ImportCounts]
    /// Files of a zip container whose size and SHA-256 were checked.
    public var filesVerified: Int
    /// Of those, files this import stored for the device (`BundleImporter.storedFile`); a file stored by an
    /// earlier import is only checked.
    public var filesStored: Int
    /// Bytes of the manifest read.
    public var bytesRead: Int64
}

/// How far an import has got, reported as it goes.
public struct ImportProgress: Sendable, Hashable {
    /// Records read so far.
    public var records: Int
    /// Bytes of the manifest read so far.
    public var bytesRead: Int64
    /// The manifest's size, for a percentage (0 when unknown).
    public var totalBytes: Int64
}
