import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema

/// The device's database, the source of truth. Every read is local and never touches the network;
/// every write is one transaction holding the row, its field clocks, one queued mutation and one
/// audit entry, so either all of them land or none does.
///
/// Reads run concurrently on the WAL pool; writes are serialized by one writer that also owns the
/// device's hybrid logical clock, so clocks stay monotonic across writes and restarts.
public final class LocalStore: Sendable {
    /// The database file.
    public let path: String
    /// This device's node id in every clock it issues, created on first open and kept in the file.
    public let node: NodeID
    let pool: DatabasePool
    /// Copies the WAL into the file once a commit leaves it past `checkpointPages`.
    let checkpointer: WALCheckpointer
    let writer: StoreWriter
    let observers = StoreObservers()
    /// The owner this store's claims name (see `claimMutations`).
    let claimOwner: ClaimOwner
    /// Free bytes on the store's volume that pulled pages never take (see `open`).
    let keptFreeBytes: Int64
    /// Where the free space of the store's volume is read: the file system, or a test's simulated volume,
    /// whose free space no other test's files move (a real volume's did, in CI, and the room tests flaked).
    let volume: StoreVolume

    /// What `open` keeps free by default: room for a day of a crew's writes and their photos' records.
    public static let defaultFreeBytesKept: Int64 = 128 << 20

    /// Opens (creating and migrating as needed) the store at `path`. WAL with `synchronous = NORMAL`:
    /// a committed write survives a crash of the app; a power loss may lose the last few commits but
    /// never corrupts the file (see the package README, "Durability").
    ///
    /// `busyTimeout` is how long a write waits for another process's write transaction on the file (a
    /// pull page, an import) before it fails with `databaseBusy`, writing nothing: a share extension
    /// with a few seconds to live may want less than the default minute.
    ///
    /// `app` is the app's schema and its migration steps; the
    /// store installs the schema for the process, and refuses a file that belongs to another app.
    ///
    /// `keepingFree` is the free space on the store's volume that pulled pages never take: a page
    /// that finds less is refused with `storageFull`, so a server sending records without end (or a
    /// project larger than the phone) stops the pull, not the user's own writes.
    public static func open(
        at path: String, app: LocalApp, synchronous: SynchronousMode = .normal,
        busyTimeout: Duration = .seconds(LocalDatabase.busyTimeout), keepingFree: Int64 = LocalStore.defaultFreeBytesKept
    ) throws(StoreError) -> LocalStore {
        try open(at: path, app: app, synchronous: synchronous, busyTimeout: busyTimeout, keepingFree: keepingFree, volume: .system)
    }

    /// `open(at:app:synchronous:busyTimeout:keepingFree:)` reading the volume's free space from `volume`.
    static func open(
        at path: String, app: LocalApp, synchronous: SynchronousMode = .normal,
        busyTimeout: Duration = .seconds(LocalDatabase.busyTimeout), keepingFree: Int64 = LocalStore.defaultFreeBytesKept,
        volume: StoreVolume
    ) throws(StoreError) -> LocalStore {
        // Migrate before opening the WAL pool: a file this build must refuse (written by a newer app)
        // is then refused before anything, the journal mode included, is changed.
        try LocalDatabase.migrate(at: path, app: app)
        let busySeconds = Double(busyTimeout.components.seconds) + Double(busyTimeout.components.attoseconds) / 1e18
        var configuration = LocalDatabase.configuration(busyTimeout: busySeconds)
        let pragma = synchronous.rawValue
        // A full-sync store checkpoints on the writer at the first line, as SQLite's rule did: each of its
        // commits syncs the WAL, and a WAL that grows instead of starting over adds its size to every
        // sync (writes/s 0.71× → 0.48× the sqlite3 CLI with the background copy).
        let writerLine = synchronous == .full ? Self.checkpointPages : Self.inlineCheckpointPages
        let checkpointer = try StoreError.mapping(path: path) {
            try WALCheckpointer(
                path: path, synchronous: pragma, backgroundPages: Self.checkpointPages, inlinePages: writerLine,
                busyTimeout: busySeconds)
        }
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(pragma)")
            // Checkpoint every 4,000 pages (16 MB of WAL) instead of SQLite's 1,000: a local write dirties
            // about nine pages, most of them the same hot leaves again and again, so checkpoints four
            // times rarer copy far fewer pages and wait on far fewer syncs (writes/s +40%).
            // The WAL file is cut back to 20 MB after a checkpoint so it never stays larger.
            // Past that, on a connection of its own (`WALCheckpointer`): the commit returns once committed.
            // Every connection the pool opens holds the checkpointer; only the writer ever commits.
            checkpointer.install(on: db)
            try db.execute(sql: "PRAGMA journal_size_limit = \(20 << 20)")
        }
        let pool = try StoreError.mapping(path: path) {
            try Self.whileTurningToWAL(waitingAtMost: busySeconds) {
                let pool = try DatabasePool(path: path, configuration: configuration)
                // Again on the writer, after the pool is open: GRDB turns its writer to NORMAL when it sets
                // up WAL, after `prepareDatabase` ran, so `.full` set there alone was silently NORMAL.
                try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = \(pragma)") }
                return pool
            }
        }
        let (node, last) = try StoreError.mapping(path: path) {
            try pool.write { db in
                try MutationQueue.finishLeftovers(in: db)
                return try StoreWriter.loadClockState(db)
            }
        }
        return LocalStore(
            path: path, pool: pool, checkpointer: checkpointer, node: node, last: last, keepingFree: keepingFree, volume: volume)
    }

    /// Runs `open` (the pool's opening) again while SQLite answers busy, until `seconds` have passed
    /// since the first attempt, pausing a few milliseconds more each time (to 100 ms, with jitter); an
    /// attempt under way at that moment may still wait its own busy timeout. The pool turns a new file
    /// to WAL, which takes the file's exclusive lock: of two processes doing so at once, SQLite fails one
    /// at once, without its busy handler (waiting, each holding its shared lock, they would deadlock),
    /// and only a new attempt goes on. Six processes opening one new store at once lost some of their
    /// opens so, `databaseBusy` at once though the store waits a minute (attack 126, F6).
    private static func whileTurningToWAL<Opened>(waitingAtMost seconds: TimeInterval, _ open: () throws -> Opened) throws -> Opened {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .milliseconds(Int64(min(seconds, 86_400) * 1_000)))
        var pause: UInt32 = 2_000
        while true {
            do {
                return try open()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && clock.now < deadline {
                usleep(pause + UInt32.random(in: 0..<pause))
                pause = min(pause * 2, 100_000)
            }
        }
    }

    /// WAL pages between automatic checkpoints (SQLite's `wal_autocheckpoint`).
    static let checkpointPages = 4_000
    /// WAL pages past which a commit checkpoints on the writer, the background copy having fallen behind
    /// (the WAL's bound, with one transaction; see `WALCheckpointer`).
    static let inlineCheckpointPages = 8_000

    private init(path: String, pool: DatabasePool, checkpointer: WALCheckpointer, node: NodeID, last: HybridTimestamp?, keepingFree: Int64, volume: StoreVolume) {
        self.path = path
        self.keptFreeBytes = keepingFree
        self.volume = volume
        let owner = ClaimOwner.current()
        self.claimOwner = owner
        self.pool = pool
        self.checkpointer = checkpointer
        self.node = node
        self.writer = StoreWriter(clock: HybridLogicalClock(node: node, last: last), origin: owner.text)
    }

    deinit {
        checkpointer.close()
        claimOwner.release()
    }

    /// SQL that reads `column` of the store's file, holding record ids as their text or as their 16 bytes
    /// (`audit_log.record_id`, toolkit step 6 on), as their text: for the store's own queries and for
    /// tools that read the file with SQLite. Anything else the column holds reads as it is.
    public static func idTextSQL(of column: String) -> String {
        let hex = "hex(\(column))"
        return "(CASE WHEN typeof(\(column)) = 'blob' AND length(\(column)) = 16 THEN lower(substr(\(hex), 1, 8) || '-' || "
            + "substr(\(hex), 9, 4) || '-' || substr(\(hex), 13, 4) || '-' || substr(\(hex), 17, 4) || '-' || substr(\(hex), 21)) "
            + "ELSE \(column) END)"
    }

    /// SQLite's durability setting for the store's connections.
    public enum SynchronousMode: String, Sendable {
        /// Fsync at checkpoints only: fast; a power loss may undo the latest commits.
        case normal = "NORMAL"
        /// Fsync on every commit: a committed write survives power loss, at a cost in write speed.
        case full = "FULL"
    }

    // MARK: Reads

    /// The record `id` of `entity`, tombstones included; nil when the device has never seen it.
    public func record(_ entity: EntityType, id: UUID) throws(StoreError) -> EntityRecord? {
        try read { try EntityTables.fetchRecord(entity, id: id, in: $0) }
    }

    /// The typed value `id`, tombstones included.
    public func fetch<Model: Syncable>(_ type: Model.Type, id: UUID) throws(StoreError) -> Model? {
        try read { try EntityTables.fetchModel(Model.self, id: id, in: $0) }
    }

    /// Live (not deleted) values whose `field` holds `value`, such as the issues of a project
    /// (`field: "projectID"`), in creation order. `field` must be one of the model's catalog fields.
    public func fetchAll<Model: Syncable>(
        _ type: Model.Type, where field: String, equals value: FieldValue
    ) throws(StoreError) -> [Model] {
        try read { try EntityTables.fetchLiveModels(Model.self, where: field, equals: value, in: $0) }
    }

    /// What SQLite's `quick_check` finds wrong with the pages of the database at `path` (at most ten
    /// problems, joined), read-only, before anything opens it for writing; nil when every page holds.
    /// The audit walk reads only the rows it checks, so a file with a damaged page of another table
    /// walked "intact", and opening a store upgrades and writes to the file first. A page too damaged to
    /// step past, or a file that is no database, is damage too; any other failure (a file that cannot
    /// be opened, a lock) is thrown, not called damage.
    public static func pageDamage(at path: String) throws(StoreError) -> String? {
        var configuration = Configuration()
        configuration.readonly = true
        return try StoreError.mapping(path: path) {
            do {
                let queue = try DatabaseQueue(path: path, configuration: configuration)
                defer { try? queue.close() }
                let problems = try queue.read { try String.fetchAll($0, sql: "PRAGMA quick_check(10)") }
                return problems == ["ok"] ? nil : problems.joined(separator: "; ")
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB {
                return error.message ?? "\(error)"
            }
        }
    }

    /// Walks the audit chain and reports the first entry that was edited, removed or reordered.
    public func verifyAudit() throws(StoreError) -> AuditReport {
        try read { try AuditTrail.verify($0) }
    }

    /// Queued mutations in queue order, optionally only those with `status`. A finished mutation (the
    /// server acknowledged it, or a merge left it nothing to send) leaves the queue; its key stays in
    /// `finishedMutationKeys()`.
    public func mutations(status: MutationStatus? = nil) throws(StoreError) -> [Mutation] {
        try read { try MutationQueue.all(status: status, in: $0) }
    }

    /// The idempotency key of every mutation that left the queue finished: what to hold a server's
    /// applied keys against (every key it applied from this device is here once the device knows it).
    /// About 40 bytes each, where the whole mutation was 420.
    public func finishedMutationKeys() throws(StoreError) -> Set<UUID> {
        try read { try MutationQueue.finishedKeys(in: $0) }
    }

    /// Every change of this device the server has not taken (waiting, being sent, or refused), in queue
    /// order: what a user taken off a project hands over, and what an app shows before it lets a
    /// device be reset. Each carries the fields it writes; one whose fields cannot be read is listed
    /// with none, and why (`Mutation.unreadable`).
    public func unsentChanges() throws(StoreError) -> [Mutation] {
        try read { db in try MutationQueue.all(status: nil, listingUnreadable: true, in: db).filter { $0.status != .done } }
    }

    /// What the app shows as sync status: pending and failed changes, open conflicts, last sync.
    public func status() throws(StoreError) -> StoreStatus {
        try read { try StoreStatus.read($0) }
    }

    /// Changes committed from now on, for a UI that refreshes what it shows: this store's own writes
    /// and pulls at once, and those of other processes on the file (the app's share extension, a
    /// widget, another `LocalStore`) within about a quarter of a second (`ChangeJournal`).
    public func changes() -> AsyncStream<StoreChange> {
        let (stream, startWatching) = observers.subscribe()
        if startWatching { watchOtherProcesses() }
        return stream
    }

    /// Publishes other stores' commits to this store's subscribers until none is left.
    private func watchOtherProcesses() {
        let after: Int64
        do {
            after = try read { try ChangeJournal.latest(in: $0) }
        } catch {
            observers.stopWatching()
            return
        }
        let pool = self.pool, observers = self.observers, origin = claimOwner.text
        Task.detached {
            var last = after
            while observers.keepWatching() {
                try? await Task.sleep(for: ChangeJournal.pollInterval)
                let since = last
                guard let (newest, changes) = try? await pool.read({ db in
                    try ChangeJournal.changes(after: since, notBy: origin, in: db)
                }) else { continue }
                last = newest
                for change in changes { observers.publish(change) }
            }
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        try StoreError.mapping(path: path) { try pool.read(body) }
    }

    func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        try StoreError.mapping(path: path) { try pool.write(body) }
    }

    /// `write`, telling `changes()` of the records `body` notes in `changed`: appended to the change
    /// journal in the same transaction (for other processes) and published once it committed (here).
    /// For the queue's transitions that rewrite a record's row; local writes, pulls and imports journal
    /// through their own transactions.
    func writeAnnouncing<T>(_ body: (Database, inout [StoreChange]) throws -> T) throws(StoreError) -> T {
        let origin = claimOwner.text
        let (result, changed) = try write { db in
            var changed: [StoreChange] = []
            let result = try body(db, &changed)
            try ChangeJournal.append(changed, origin: origin, in: db)
            return (result, changed)
        }
        for change in changed { observers.publish(change) }
        return result
    }
}

/// One committed write, as observers see it.
public struct StoreChange: Sendable, Hashable {
    public let entity: EntityType
    public let recordID: UUID
    public let operation: MutationOperation
}

/// Fans committed changes out to every subscriber's stream. A lock rather than `Mutex`, which needs
/// iOS 18 / macOS 15; every access to `continuations` goes through `lock`, hence `@unchecked Sendable`.
final class StoreObservers: @unchecked Sendable {
    private let lock = NSLock()
    private var continuations: [UUID: AsyncStream<StoreChange>.Continuation] = [:]

    /// Whether a task watches the change journal for this store's subscribers.
    private var watching = false

    /// A new subscriber's stream, and whether the caller must start watching the change journal.
    func subscribe() -> (AsyncStream<StoreChange>, startWatching: Bool) {
        let (stream, continuation) = AsyncStream<StoreChange>.makeStream(bufferingPolicy: .bufferingNewest(1_000))
        let id = UUID()
        let start = lock.withLock { () -> Bool in
            continuations[id] = continuation
            defer { watching = true }
            return !watching
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return (stream, start)
    }

    /// Whether the journal watch goes on: while anyone subscribes; else it ends, under the lock, so a
    /// subscriber arriving now starts another.
    func keepWatching() -> Bool {
        lock.withLock {
            if continuations.isEmpty { watching = false }
            return watching
        }
    }

    /// The watch could not start.
    func stopWatching() { lock.withLock { watching = false } }

    /// Whether anyone listens: work done only to publish can be skipped when no one does.
    var hasSubscribers: Bool { lock.withLock { !continuations.isEmpty } }

    func publish(_ change: StoreChange) {
        for continuation in lock.withLock({ Array(continuations.values) }) { continuation.yield(change) }
    }

    private func remove(_ id: UUID) {
        _ = lock.withLock { continuations.removeValue(forKey: id) }
    }
}
