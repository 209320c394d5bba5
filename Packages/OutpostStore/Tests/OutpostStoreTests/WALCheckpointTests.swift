@testable import OutpostStore
import Foundation
import GRDB
import Testing

/// A commit that leaves the write-ahead log past the line returns once committed and leaves the copy into
/// the file to a connection of its own; past the higher line the writer copies it itself, so the log
/// stays bounded when the background copy falls behind (issue 41: an import's commit copied 50,000
/// records a second time before returning, 0.14–0.18 s of a 1.1 s pre-sync).
@Suite struct WALCheckpointTests {
    /// A WAL database with `checkpointer` on its writer, its file in a fresh temporary folder.
    func pool(_ checkpointer: (String) throws -> WALCheckpointer) throws -> (DatabasePool, WALCheckpointer, String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("wal-checkpoint-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("store.sqlite").path
        let made = try checkpointer(path)
        var configuration = Configuration()
        configuration.prepareDatabase { db in made.install(on: db) }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { try $0.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)") }
        return (pool, made, path)
    }

    /// Writes `rows` rows of 4 KB in one transaction: about a WAL page each.
    func write(_ rows: Int, into pool: DatabasePool) throws {
        try pool.write { db in
            for _ in 0..<rows {
                try db.execute(sql: "INSERT INTO t (body) VALUES (randomblob(4000))")
            }
        }
    }

    func fileSize(_ path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? -1
    }

    @Test func aCommitPastTheLineLeavesTheCopyToTheBackground() throws {
        let queue = DispatchQueue(label: "held checkpoints")
        let (pool, checkpointer, path) = try pool {
            try WALCheckpointer(path: $0, synchronous: "NORMAL", backgroundPages: 50, inlinePages: 10_000, busyTimeout: 5, queue: queue)
        }
        defer { checkpointer.close() }
        let before = try fileSize(path)
        queue.suspend()
        let wrote = Result { try write(200, into: pool) }
        // Committed and readable, and not yet in the file: the commit did not copy it.
        #expect(try pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } == 200)
        #expect(try fileSize(path) == before)
        queue.resume()
        try wrote.get()
        checkpointer.waitForPendingCheckpoint()
        #expect(try fileSize(path) > before + 200 * 4_000)
    }

    @Test func aCommitBelowTheLineAsksForNoCopy() throws {
        let queue = DispatchQueue(label: "held checkpoints")
        let (pool, checkpointer, path) = try pool {
            try WALCheckpointer(path: $0, synchronous: "NORMAL", backgroundPages: 1_000, inlinePages: 10_000, busyTimeout: 5, queue: queue)
        }
        defer { checkpointer.close() }
        let before = try fileSize(path)
        try write(200, into: pool)
        checkpointer.waitForPendingCheckpoint()
        #expect(try fileSize(path) == before)
    }

    @Test func theWriterCopiesItselfWhenTheBackgroundFallsBehind() throws {
        let queue = DispatchQueue(label: "held checkpoints")
        let (pool, checkpointer, path) = try pool {
            try WALCheckpointer(path: $0, synchronous: "NORMAL", backgroundPages: 50, inlinePages: 300, busyTimeout: 5, queue: queue)
        }
        defer {
            queue.resume()
            checkpointer.close()
        }
        queue.suspend()
        let before = try fileSize(path)
        try write(200, into: pool)
        #expect(try fileSize(path) == before)
        // The log passes the higher line with the background held back: this commit copies it.
        try write(200, into: pool)
        #expect(try fileSize(path) > before + 400 * 4_000)
    }

    /// Commit after commit, the background copy never lets SQLite start the log over (that needs a write
    /// to begin after a whole copy): the writer's own copy past `inlinePages` does, and the log stays
    /// under that line and one transaction (review 129: 71–80 MB in a long pull with the line at 16,000).
    @Test func theLogStaysUnderTheWritersLineAndOneTransactionCommitAfterCommit() throws {
        let (pool, checkpointer, path) = try pool {
            try WALCheckpointer(path: $0, synchronous: "NORMAL", backgroundPages: 50, inlinePages: 200, busyTimeout: 5)
        }
        defer { checkpointer.close() }
        var largest = 0
        for _ in 0..<60 {
            try write(30, into: pool)
            largest = max(largest, (try? fileSize(path + "-wal")) ?? 0)
        }
        // A page of the log is its 4,096 bytes and a 24-byte header; the commit of 30 rows dirties
        // about 32 pages (the table's B-tree interior too). Without the writer's line the log reached
        // the 60 commits' 1,900 pages; with a writer that did not wait for a background copy under way,
        // 304.
        #expect(largest <= (200 + 40) * 4_120 + 32)
    }

    @Test func aClosedCheckpointerStartsNoCopy() throws {
        let queue = DispatchQueue(label: "held checkpoints")
        let (pool, checkpointer, path) = try pool {
            try WALCheckpointer(path: $0, synchronous: "NORMAL", backgroundPages: 50, inlinePages: 10_000, busyTimeout: 5, queue: queue)
        }
        checkpointer.close()
        let before = try fileSize(path)
        try write(200, into: pool)
        checkpointer.waitForPendingCheckpoint()
        #expect(try fileSize(path) == before)
    }
}
