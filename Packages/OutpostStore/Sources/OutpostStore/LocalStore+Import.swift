import Foundation
import GRDB
import OutpostBundles
import OutpostSchema

extension LocalStore {
    /// Imports the pre-sync bundle at `url` (`.xml`, `.json` or `.zip`): the night-before download a crew
    /// works from all day. Reports progress every 1,000 records.
    ///
    /// `BundleImporter` reads and checks the bundle on a thread of its own; this store writes its records
    /// in one transaction on its writer connection, through the rule pulled records go through
    /// (`ServerArrival`): any error (a malformed document, a record breaking a rule, a file whose
    /// checksum differs) rolls it back and leaves the store as it was. Importing the same bundle twice
    /// changes nothing the second time, and a record with a change waiting keeps it for the push to
    /// settle. Every record written is published to `changes()`, here and in other processes.
    ///
    /// Synchronous, like the parse it waits on: call it off the main thread. Other writes wait for it
    /// (up to the store's busy timeout, for other processes).
    ///
    /// `fromServer`: the bundle is one this device has just downloaded from its own server over its
    /// authenticated connection (`Device.preSync`), never a file handed over. Its versions are then the
    /// server's word, as a pull's are, so they are not held as the bundle's (`ImportedVersions`); and
    /// when the import took every record as it was into a store that held none of them, the project's
    /// position is kept for the next pull (`bundlePositions()`), which then brings only what changed
    /// after the bundle was made. A bundle file's records stay its word until the next pull has read the
    /// project again from its beginning (`rereadProjects()`, `settleRereadImports(asked:)`): what that
    /// read does not bring is not the server's, and goes.
    ///
    /// `project`: the project the bundle must be of (a pre-sync asked the server for it); a bundle of
    /// another is refused with `outsideProject` and nothing is written. A server that answered with
    /// another project's bundle left the device believing it held a project it held none of (attack 57).
    ///
    /// `arriving`: the file is still being downloaded (`BundleImporter.open(_:arriving:)`); the import
    /// reads it as it arrives, holding the write lock meanwhile, and a failed download rolls it back.
    @discardableResult
    public func importBundle(
        at url: URL, limits: BundleLimits = .standard, fromServer: Bool = false, project: UUID? = nil,
        arriving: BundleArrival? = nil, progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) throws(BundleError) -> ImportSummary {
        try checkRoomForImport(of: url)
        let stream = try BundleImporter(limits: limits).open(url, arriving: arriving, forDatabaseAt: path) {
            bytes throws(BundleError) in try checkRoomForImport(of: url, needing: bytes)
        }
        let origin = claimOwner.text
        do {
            let (counts, journal) = try pool.writeWithoutTransaction { db in
                // An 8 MiB page cache at least (four times SQLite's default), which also sizes the sorter
                // that orders staged rows; staging tables in a temporary file, never in memory, whatever
                // SQLite was built with (`temp_store` cannot change inside a transaction). Both keep an
                // import's memory bounded however large the bundle.
                if try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? 0 > -Self.importCacheKilobytes {
                    try db.execute(sql: "PRAGMA cache_size = -\(Self.importCacheKilobytes)")
                }
                try db.execute(sql: "PRAGMA temp_store = FILE")
                let before = try ChangeJournal.latest(in: db)
                try db.execute(sql: "BEGIN IMMEDIATE TRANSACTION")
                do {
                    let session = try ImportSession(db: db, origin: origin, stream: stream, notesVersions: !fromServer)
                    var records = 0
                    // Room is checked by bytes too: 1,024 records of three 1 MB values each took 3 GB of a
                    // volume between two checks by count (attack 69, finding 1).
                    var bytesStaged: Int64 = 0, stagedAtCheck: Int64 = 0
                    // Checked once the header is read (a JSON bundle may name its project after its
                    // records), and at the end whatever came: in one transaction, nothing stays either way.
                    func checkProject(atEnd: Bool = false) throws(BundleError) {
                        guard let project, stream.projectID != project, atEnd || stream.projectID != nil else { return }
                        throw BundleError(
                            .outsideProject,
                            message: "the bundle is of project \(stream.projectID?.uuidString.lowercased() ?? "(none named)"), "
                                + "not of \(project.uuidString.lowercased()) as asked; nothing was imported",
                            file: url.path)
                    }
                    while let batch = try stream.nextBatch() {
                        try checkProject()
                        for item in batch {
                            try session.apply(item.record, at: item.location)
                            bytesStaged += Int64(512 + item.record.valueBytes)
                        }
                        let reached = records + batch.count
                        let journals = reached / Self.journalEvery > records / Self.journalEvery
                        if journals { try session.journal() }
                        if journals || bytesStaged - stagedAtCheck >= Self.roomCheckBytes {
                            try checkRoomForImport(of: url)
                            stagedAtCheck = bytesStaged
                        }
                        if let progress, reached / 1000 > records / 1000 {
                            progress(ImportProgress(records: reached, bytesRead: stream.bytesRead, totalBytes: stream.totalBytes))
                        }
                        records = reached
                    }
                    try checkProject(atEnd: true)
                    // The end moves the staged records into their tables in one statement each, through the
                    // WAL and then into the file: twice their bytes, with no check between. Room for that is
                    // asked for first (an import of 624 MB ran 718 MB past a simulated volume's end there,
                    // attack 70).
                    try checkRoomForImport(of: url, needing: bytesStaged.multipliedReportingOverflow(by: 2).partialValue)
                    try session.finish(at: stream.documentLocation ?? SourceLocation(file: url.path))
                    // The records may come from a history a server restore has lost since: the next
                    // sync asks the server about each checkpoint the bundle carries.
                    if let (waiting, maximum) = try HistoryState.noteImported(stream.checkpoints, in: db) {
                        throw BundleError(
                            .limitExceeded,
                            message: "this import would leave \(waiting) checkpoints of the server's history waiting for the "
                                + "server to confirm them, more than the \(maximum) this device keeps; "
                                + "sync, then import again. Nothing was imported",
                            file: url.path)
                    }
                    // The server writes one checkpoint: the newest change of the project's records it read.
                    // Not with server ids: the references they hold are linked by the pull that names each
                    // record's server id, which a position would skip (the reliability scenario found
                    // references left as "1" for good).
                    let total = session.counts.values.reduce(ImportCounts(), +)
                    if fromServer, total.records > 0, total.inserted == total.records, stream.checkpoints.count == 1,
                        !session.carriesServerIDs, let project = stream.projectID
                    {
                        try BundlePositions.save(project: project, checkpoint: stream.checkpoints[0], in: db)
                    } else if let project = stream.projectID {
                        // Any other import of the project forgets where an earlier one left it: an older bundle
                        // imported after a newer one brought back records deleted between the two, and the
                        // pull, starting at the newer one's position, never sent the deletes (attack 125, F1).
                        try BundlePositions.forget(project: project, in: db)
                    }
                    // A file's records are its holder's word until a read of the whole project confirms them.
                    // Whatever the counts say: a record kept as it was may still be noted as the file's (one
                    // stored orphaned until its parent came), and a read begun before this import must not
                    // settle it.
                    if !fromServer, let project = stream.projectID { try RereadProjects.request(project, in: db) }
                    try stream.stageFiles(forDatabaseAt: path) { bytes throws(BundleError) in
                        try checkRoomForImport(of: url, needing: bytes)
                    }
                    progress?(ImportProgress(records: records, bytesRead: stream.bytesRead, totalBytes: stream.totalBytes))
                    let after = try ChangeJournal.latest(in: db)
                    try db.execute(sql: "COMMIT TRANSACTION")
                    return (session.counts, (before, after))
                } catch {
                    try? db.rollback()
                    throw error
                }
            }
            let stored = try stream.storeFiles()
            publishImported(journal: journal, origin: origin)
            return ImportSummary(
                format: stream.format.rawValue, projectID: stream.projectID,
                total: counts.values.reduce(ImportCounts(), +),
                byEntity: Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }),
                filesVerified: stream.shipsFiles ? stream.filesListed : 0, filesStored: stored,
                bytesRead: stream.bytesRead)
        } catch let error as BundleError {
            stream.discardFiles()
            throw error
        } catch {
            stream.discardFiles()
            throw BundleError(.databaseFailure, message: "\(error); nothing was imported", file: path, underlying: error)
        }
    }

    /// `checkRoomForPulledData` for an import, every `journalEvery` records too: a bundle, from a server
    /// or a file, takes no more of the room the store keeps for the user's own writes than a pull does
    /// (a pre-sync wrote 715 MB with 9 MB free; attack 66 F4). Refused, the import rolls back whole.
    /// With `needing`, room for that many bytes more beside it (a zip's file before it is copied, the
    /// staged records before they are moved into their tables).
    private func checkRoomForImport(of url: URL, needing: Int64 = 0) throws(BundleError) {
        do {
            try checkRoomForPulledData(waiting: "imports wait", needing: needing)
        } catch {
            throw BundleError(.limitExceeded, message: "\(error.message); nothing was imported", file: url.path, underlying: error)
        }
    }

    /// The writer connection's page cache during an import, at least.
    static let importCacheKilobytes = 8 * 1024
    /// Bytes of records' values an import writes between two checks of the room, at most.
    static let roomCheckBytes: Int64 = 4 << 20
    /// Records per change-journal entry an import writes.
    static let journalEvery = 1_024

    /// Tells this process's subscribers of what the import wrote, read back from the journal entries it
    /// committed (other processes read them on their own).
    private func publishImported(journal: (before: Int64, after: Int64), origin: String) {
        guard observers.hasSubscribers, journal.after > journal.before else { return }
        try? pool.read { db in
            try ChangeJournal.forEachChange(by: origin, after: journal.before, through: journal.after, in: db) {
                observers.publish($0)
            }
        }
    }
}
