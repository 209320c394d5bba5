import Foundation
import GRDB
import GRDBSQLite

/// Copies the store's write-ahead log into its file on a thread of its own, once a commit leaves the log
/// past `LocalStore.checkpointPages`, so that the write that crossed the line returns as soon as it is
/// committed to the log (synced there with `synchronous = FULL`; see below for NORMAL).
///
/// Why: SQLite's automatic checkpoint runs inside the commit that crosses its threshold, on the writer.
/// An import commits every record in one transaction, so its commit copied the whole import a second
/// time before returning: 0.14–0.18 s of a 1.1 s pre-sync of 50,000 records on this host, with the
/// reading thread already done and one core idle (`perf`, issue 41). A pull's pages did the same every
/// 16 MB on the thread that applies the next page. A checkpoint on another connection never blocks the
/// writer (SQLite's `PASSIVE` mode copies only what is committed and steps aside for readers): what
/// this moves is when the copy runs, never what an app crash keeps (`kill -9` at 57 moments around the
/// commit and the copy, review 129: every import whole or absent). With `synchronous = NORMAL` a commit
/// is not synced to disk, as SQLite's NORMAL never syncs one; the inline copy used to sync the log
/// before a large commit returned, by the way, and now the background copy does so a moment later.
///
/// The log stays bounded, by `inlinePages` and one transaction: a commit that finds it past that line
/// checkpoints on the writer as SQLite's own rule did. SQLite starts the log over only when a write
/// transaction begins after the log was copied whole, and a pull begins its next page at once, before
/// the background copy ends: with the line at 16,000 pages a long pull's log reached 71–80 MB (review
/// 129, a 200,000-record sync), against about 22 MB under SQLite's rule. At 8,000 pages the writer's own
/// copy finds most of the log already copied by the background one and copies only the rest.
final class WALCheckpointer: @unchecked Sendable {
    // Unchecked: `scheduled` and `closed` are read and written under `lock` only; the connection is used
    // on `queue` only, one checkpoint at a time (`interrupt()` is made to be called from any thread).
    private let connection: DatabaseQueue
    private let queue: DispatchQueue
    private let lock = NSCondition()
    private var scheduled = false
    private var closed = false
    /// Whether a background checkpoint is copying now.
    private var running = false

    /// Log pages past which the writer checkpoints itself, whatever the background copy does.
    let inlinePages: Int32
    /// Log pages past which a commit asks for a background checkpoint.
    let backgroundPages: Int32

    /// Opens the checkpoints' connection to the database at `path` now, while the file is known to be
    /// there (opened later, a file deleted meanwhile would be created anew, empty). `queue` runs the
    /// background checkpoints, one at a time (a test suspends it to hold them back).
    init(
        path: String, synchronous: String, backgroundPages: Int, inlinePages: Int, busyTimeout: TimeInterval,
        queue: DispatchQueue = DispatchQueue(label: "outpost-store-checkpoint", qos: .utility)
    ) throws {
        var configuration = Configuration()
        // Opening waits as long as the store's own connections: opened while another process turned the
        // new file to WAL or migrated it, this connection's first statement failed "database is locked" at
        // once, and so did the store's open (6 processes opening one new store: 10 of 150 opens; attack
        // 126, F6). Once open it waits for nothing again (below): the writer may wait for its copy.
        configuration.busyMode = .timeout(busyTimeout)
        // A checkpoint syncs the file as the store's own writes do.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        self.connection = try DatabaseQueue(path: path, configuration: configuration)
        connection.inDatabase { db in _ = sqlite3_busy_timeout(db.sqliteConnection, 0) }
        self.queue = queue
        self.backgroundPages = Int32(backgroundPages)
        self.inlinePages = Int32(inlinePages)
    }

    /// Replaces SQLite's automatic checkpoint on `db` (the store's writer) with this one's rule. The hook
    /// holds this checkpointer unretained: the caller installs it from the pool's `prepareDatabase`, whose
    /// closure holds the checkpointer, and every GRDB connection keeps its configuration, so the
    /// checkpointer outlives every connection that can call the hook.
    func install(on db: Database) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_wal_hook(db.sqliteConnection, { context, connection, schema, pages in
            guard let context else { return SQLITE_OK }
            let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
            if pages >= checkpointer.inlinePages {
                // What SQLite's automatic checkpoint does; a failure (a reader in the way) is not the
                // commit's, which is already committed. A background copy under way would make it busy,
                // and the log would pass the line by a few more commits (the test of that found 304
                // pages over a line of 200): it is waited for, and this copies what it left.
                checkpointer.waitWhileCopying()
                _ = sqlite3_wal_checkpoint_v2(connection, schema, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            } else if pages >= checkpointer.backgroundPages {
                checkpointer.schedule()
            }
            return SQLITE_OK
        }, context)
    }

    /// Asks for a checkpoint on the background queue, unless one is already waiting to run.
    func schedule() {
        lock.lock()
        defer { lock.unlock() }
        guard !scheduled, !closed else { return }
        scheduled = true
        queue.async { [self] in run() }
    }

    /// Stops a checkpoint under way (SQLite keeps what it copied; the next one goes on from there) and
    /// lets no other start, then closes the connection; later commits checkpoint on the writer past
    /// `inlinePages` only. The store calls it as it closes, so nothing touches the file once the store is
    /// gone, without waiting out a copy of thousands of pages (0.2–0.3 s for 7,900 here).
    func close() {
        lock.lock()
        closed = true
        lock.unlock()
        connection.interrupt()
        queue.sync {
            try? connection.close()
        }
    }

    /// Returns once no background checkpoint is copying. It never waits for the writer (`PASSIVE`), so
    /// the writer may wait for it.
    func waitWhileCopying() {
        lock.lock()
        while running { lock.wait() }
        lock.unlock()
    }

    /// Returns once no checkpoint asked for before this call is still to run.
    func waitForPendingCheckpoint() {
        queue.sync {}
    }

    private func run() {
        lock.lock()
        scheduled = false
        let isClosed = closed
        running = !isClosed
        lock.unlock()
        guard !isClosed else { return }
        defer {
            lock.lock()
            running = false
            lock.broadcast()
            lock.unlock()
        }
        do {
            try connection.writeWithoutTransaction { db in
                // A connection learns that the file is in WAL mode when it reads it, and checkpoints
                // nothing before: opened on a new store before the pool turned WAL on, it copied nothing
                // (`aCommitPastTheLineLeavesTheCopyToTheBackground`).
                _ = try Int.fetchOne(db, sql: "PRAGMA schema_version")
                // PASSIVE: copies what is committed, never waits on the writer or a reader.
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
            }
        } catch {
            // The next commit past the line asks again, and the writer checkpoints itself past
            // `inlinePages`: a failed copy leaves the log longer, never a commit undone.
        }
    }
}
