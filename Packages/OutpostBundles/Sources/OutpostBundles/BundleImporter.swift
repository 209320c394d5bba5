import Foundation
import GRDB
import OutpostModels
import OutpostStore

/// Imports a pre-sync bundle into a local database: the night-before download a crew works from all day.
///
/// The whole import is one transaction: any error (a malformed document, a record breaking a rule, a file
/// whose checksum differs) rolls it back and leaves the database as it was. Importing the same bundle
/// twice changes nothing the second time, and records with unsynced local changes are never overwritten.
public struct BundleImporter: Sendable {
    /// The bounds the bundle must keep.
    public var limits: BundleLimits

    /// An importer with the given limits.
    public init(limits: BundleLimits = .standard) {
        self.limits = limits
    }

    /// Imports the bundle at `url` (`.xml`, `.json` or `.zip`) into the database at `databasePath`,
    /// upgrading (or creating) it to the latest schema first, and reports progress every 1,000 records.
    @discardableResult
    public func importBundle(
        at url: URL, intoDatabaseAt databasePath: String,
        progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) throws(BundleError) -> ImportSummary {
        let source = try BundleSource(url: url, limits: limits)
        let reader = try source.reader(collecting: false)
        do {
            try LocalDatabase.migrate(at: databasePath)
        } catch {
            throw BundleError(.databaseFailure, message: "\(error)", file: databasePath)
        }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: databasePath, configuration: Self.configuration)
        } catch {
            throw BundleError(.databaseFailure, message: "\(error)", file: databasePath)
        }
        let totalBytes = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value ?? 0
        var header: BundleHeader?
        var files: [FileReference] = []
        let readAhead = ReadAhead(reader)
        readAhead.start()
        defer { readAhead.finish() }
        // A zip's files are copied aside while they are checked and stored only once the records commit.
        var incoming = source.archive.map { _ in BundleFileStore(databasePath: databasePath).beginIncoming() }
        do {
            let counts = try queue.write { db -> [EntityType: ImportCounts] in
                let session = ImportSession(db: db)
                var records = 0
                var bytesRead: Int64 = 0
                while let entry = try readAhead.next() {
                    bytesRead = entry.bytesRead
                    switch entry.item {
                    case .header(let value): header = value
                    case .file(let file, _): files.append(file)
                    case .record(let record, let location):
                        try session.apply(record, at: location)
                        records += 1
                        if records % 1000 == 0 {
                            progress?(ImportProgress(records: records, bytesRead: bytesRead, totalBytes: totalBytes))
                        }
                    }
                }
                readAhead.finish()
                try session.finish()
                if let archive = source.archive, var copies = incoming {
                    for file in files {
                        if let destination = try copies.destination(for: file) {
                            try archive.extractVerified(file, to: destination)
                        } else {
                            try archive.verify(file)
                        }
                    }
                    incoming = copies
                }
                progress?(ImportProgress(records: records, bytesRead: reader.bytesRead, totalBytes: totalBytes))
                return session.counts
            }
            try? queue.close()
            let stored = try incoming?.commit() ?? 0
            return ImportSummary(
                format: source.format.rawValue, projectID: header?.projectID,
                total: counts.values.reduce(ImportCounts(), +),
                byEntity: Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }),
                filesVerified: source.archive == nil ? 0 : files.count, filesStored: stored, bytesRead: reader.bytesRead)
        } catch let error as BundleError {
            try? queue.close()
            incoming?.discard()
            throw error
        } catch {
            try? queue.close()
            incoming?.discard()
            throw BundleError(.databaseFailure, message: "\(error); nothing was imported", file: databasePath)
        }
    }

    /// The copy of a file a zip bundle shipped (a drawing's PDF, a thumbnail) that an import stored for the
    /// database at `databasePath`, found by the SHA-256 its record names; nil when no import stored it.
    /// Files live in `<database>.files/`, named by their digest.
    public static func storedFile(sha256: String, forDatabaseAt databasePath: String) -> URL? {
        BundleFileStore(databasePath: databasePath).storedFile(sha256: sha256)
    }

    /// The import connection. An 8 MiB page cache (four times SQLite's default), which also sizes the
    /// sorter that orders staged rows; staging tables in a temporary file, never in memory, whatever
    /// SQLite was built with (`temp_store` cannot change inside a transaction, so it is set here). Both
    /// keep memory bounded for the memory target. Durability is SQLite's default: a crash mid-import
    /// leaves the database as it was before, never half-imported. It waits for the store's writes as
    /// they wait for it (`LocalDatabase.busyTimeout`).
    private static var configuration: Configuration {
        var configuration = LocalDatabase.configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA cache_size = -8192")
            try db.execute(sql: "PRAGMA temp_store = FILE")
        }
        return configuration
    }
}
