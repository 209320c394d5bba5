import Foundation
import GRDB
import GRDBSQLite

/// Copies the store's write-ahead log into its file on a thread of its own, once a commit leaves the log
/// past `LocalStore.checkpointPages`, so that the write that crossed the line returns as soon as it is
/// durable in the log.
///
/// Why: SQLite's automatic checkpoint runs inside the commit that crosses its threshold, on the writer.
/// An import commits every record in one transaction, so its commit copied the whole import a second
/// time before returning: 0.14–0.18 s of a 1.1 s pre-sync of 50,000 records on this host, with the
/// reading thread already done and one core idle (`perf`, issue 41). A pull's pages did the same every
/// 16 MB on the thread that applies the next page. A checkpoint on another connection never blocks the
/// writer (SQLite's `PASSIVE` mode copies only what is committed and steps aside for readers), and a
/// commit is durable in the log whatever the checkpoint does: what this moves is when the copy runs,
/// never what a crash keeps.
///
/// The log stays bounded: a commit that finds it past `inlinePages` (the background copy fell behind, or
/// a reader held it back) checkpoints on the writer as SQLite's own rule did.
final class WALCheckpointer: @unchecked Sendable {
    // Unchecked: `scheduled`, `closed` and `connection` are read and written under `lock` only; the
    // connection is used on `queue` only, one checkpoint at a time.
    private let path: String
    private let synchronous: String
    private let queue: DispatchQueue
    private let lock = NSLock()
    private var scheduled = false
    private var closed = false
    private var connection: DatabaseQueue?

    /// Log pages past which the writer checkpoints itself, whatever the background copy does.
    let inlinePages: Int32
    /// Log pages past which a commit asks for a background checkpoint.
    let backgroundPages: Int32

    /// `queue` runs the background checkpoints, one at a time (a test suspends it to hold them back).
    init(
        path: String, synchronous: String, backgroundPages: Int, inlinePages: Int,
        queue: DispatchQueue = DispatchQueue(label: "outpost-store-checkpoint", qos: .utility)
    ) {
        self.path = path
        self.queue = queue
        self.synchronous = synchronous
        self.backgroundPages = Int32(backgroundPages)
        self.inlinePages = Int32(inlinePages)
    }

    /// Replaces SQLite's automatic checkpoint on `db` (the store's writer) with this one's rule.
    func install(on db: Database) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_wal_hook(db.sqliteConnection, { context, connection, schema, pages in
            guard let context else { return SQLITE_OK }
            let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
            if pages >= checkpointer.inlinePages {
                // What SQLite's automatic checkpoint does; a failure (a reader in the way) is not the
                // commit's, which is already durable.
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

    /// Waits for a checkpoint under way or asked for, then lets no other start; later commits checkpoint
    /// on the writer past `inlinePages` only. The store calls it as it closes, so nothing touches the
    /// file once the store is gone.
    func close() {
        lock.lock()
        closed = true
        lock.unlock()
        queue.sync {
            lock.lock()
            let connection = self.connection
            self.connection = nil
            lock.unlock()
            try? connection?.close()
        }
    }

    /// Returns once no checkpoint asked for before this call is still to run.
    func waitForPendingCheckpoint() {
        queue.sync {}
    }

    private func run() {
        lock.lock()
        scheduled = false
        let isClosed = closed
        lock.unlock()
        guard !isClosed else { return }
        do {
            let connection = try self.connection ?? open()
            try connection.writeWithoutTransaction { db in
                // PASSIVE: copies what is committed, never waits on the writer or a reader.
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
            }
        } catch {
            // The next commit past the line asks again, and the writer checkpoints itself past
            // `inlinePages`: a failed copy leaves the log longer, never a commit undone.
        }
    }

    private func open() throws -> DatabaseQueue {
        var configuration = Configuration()
        // A checkpoint syncs the file as the store's own writes do.
        let synchronous = self.synchronous
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        let connection = try DatabaseQueue(path: path, configuration: configuration)
        lock.lock()
        self.connection = connection
        lock.unlock()
        return connection
    }
}
