@testable import OutpostServer
import Foundation
import GRDB
import OutpostFieldServiceTesting
import OutpostSync
import OutpostWire
import Testing

/// `outpost serve --db FILE` on a file that is not a server's (another program's, a device's store)
/// added the server's fifteen tables to it and went on serving. It is refused before anything is
/// written, naming what it found, and the file is left byte for byte as it was.
@Suite(.fieldService) struct ServerFileOwnershipTests {
    static func digest(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    func refusesUnchanged(_ prepare: (DatabaseQueue) throws -> Void, saying expected: String) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-owner-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("other.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            try prepare(queue)
            try queue.close()
        }
        let before = try Self.digest(path)
        let error = try #require(throws: ServerError.self) { try SQLiteStorage(path: path, assignsServerIDs: false) }
        #expect(error.code == .migrationFailed && error.path == path, "\(error)")
        #expect(error.message.contains(expected), "\(error.message)")
        #expect(try Self.digest(path) == before, "the file was written")
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the file was opened for writing")
    }

    @Test func anotherProgramsFileIsRefusedUnchanged() throws {
        try refusesUnchanged({ queue in
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
                try db.execute(sql: "INSERT INTO notes (body) VALUES ('keep me')")
            }
        }, saying: "belongs to no Outpost server")
    }

    @Test func aFileWithAnEmptyLedgerIsRefusedUnchanged() throws {
        try refusesUnchanged({ queue in
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
                try db.execute(sql: "CREATE TABLE migrator_ledger (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
            }
        }, saying: "belongs to no Outpost server")
    }

    @Test func aLedgerBegunByAnotherHistoryIsRefusedUnchanged() throws {
        try refusesUnchanged({ queue in
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE jobs (id TEXT PRIMARY KEY)")
                try db.execute(sql: "CREATE TABLE migrator_ledger (version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
                try db.execute(sql: "INSERT INTO migrator_ledger VALUES (1, 'jobs', '\(String(repeating: "ab", count: 32))', '2026-11-29')")
            }
        }, saying: "another")
    }

    @Test func anEmptyFileAndTheServersOwnOpen() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-owner-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("server.sqlite").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        _ = try SQLiteStorage(path: path, assignsServerIDs: false)
        _ = try SQLiteStorage(path: path, assignsServerIDs: false)
    }

    /// An attack found another app's server file refused only once the pool had opened, and GRDB's WAL
    /// check had committed a table's creation and drop: the file grew by a page. Told read-only now.
    @Test func anotherAppsServerFileIsRefusedUnchanged() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-owner-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("jobs-server.sqlite").path
        do { _ = try SQLiteStorage(path: path, assignsServerIDs: false) }
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { try $0.execute(sql: "UPDATE server_settings SET value = 'contractor-jobs' WHERE name = 'app_schema'") }
            try queue.close()
        }
        let before = try Self.digest(path)
        let error = try #require(throws: ServerError.self) { try SQLiteStorage(path: path, assignsServerIDs: false) }
        #expect(error.message.contains("belongs to the app 'contractor-jobs'"), "\(error)")
        #expect(try Self.digest(path) == before, "the file was written")
    }

    /// Servers started together on one new file (a fleet's instances, a restart racing the old process):
    /// the others stopped "database is locked" while one turned WAL on and migrated, since the ownership
    /// check's read did not wait (attack 74, finding 3). Each now waits as its pool does, and all start.
    @Test("Servers started together on one new file all start, each waiting while another creates it")
    func serversStartedTogetherOnANewFileAllStart() async throws {
        for round in 0..<3 {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-race-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let path = folder.appendingPathComponent("server.sqlite").path
            let failures = await withTaskGroup(of: String?.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        do {
                            _ = try SQLiteStorage(path: path, assignsServerIDs: false)
                            return nil
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                return await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
            }
            #expect(failures.isEmpty, "round \(round): \(failures)")
        }
    }

    /// A server stopped as an operator stops it left every change in the WAL beside an empty main file:
    /// a copy of the file alone (a cold backup) held no table at all (attack 75, finding 2). Once it has
    /// stopped, the file holds everything and the WAL nothing.
    @Test("A server that has stopped leaves its changes in its database file, and nothing in a WAL beside it")
    func aStoppedServerLeavesItsChangesInTheFile() async throws {
        let server = try await TestServer.start(.sqlite)
        let issues = (0..<50).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)) }
        let answer = try await server.transport(token: TestServer.aliceToken).push(PushRequest(mutations: issues))
        #expect(answer.results.allSatisfy { $0.outcome.appliedVersion == 1 })
        let path = server.databasePath
        let again = try await server.restarted {
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            #expect(wal == 0, "the WAL is checkpointed into the file and emptied at the stop")
            let copy = path + ".copy"
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            let queue = try DatabaseQueue(path: copy)
            defer { try? queue.close() }
            let count = try await queue.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM records WHERE entity = 'issue'") ?? 0
            }
            #expect(count >= issues.count, "the file alone holds the pushed issues")
        }
        await again.stop()
    }
}
