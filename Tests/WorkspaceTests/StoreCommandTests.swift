import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import Testing

/// `outpost status` and `outpost audit verify` on a store written through `LocalStore`.
@Suite(.fieldService) struct StoreCommandTests {
    @Test func statusCountsPendingChanges() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        let store = try LocalStore.open(at: path)
        for index in 0..<3 { try await store.save(Issue(projectID: UUID(), title: "Issue \(index)")) }
        let result = try await Outpost.run(["status", "--db", path, "--json"])
        #expect(result.status == 0)
        let json = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        #expect(json?["pendingChanges"] as? Int == 3)
        #expect(json?["openConflicts"] as? Int == 0)
    }

    /// Processes that open one new store at once (an app, its share extension, a tool) each open it:
    /// those that lost the race to turn the file to WAL, or opened its checkpoint connection meanwhile,
    /// failed at once with `databaseBusy` (10 opens of 150 on this host, 1 to 4 in this test's 60 before
    /// the fix), though the store waits a minute for a busy file (attack 126, F6).
    @Test func processesOpeningOneNewStoreAtOnceEachOpenIt() async throws {
        let folder = try TemporaryFolder()
        var failures: [String] = []
        for round in 0..<6 {
            let path = folder.file("device-\(round).sqlite")
            let results = try await withThrowingTaskGroup(of: [Outpost.Result].self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        let migrated = try await Outpost.run(["migrate", "--db", path])
                        guard migrated.status == 0 else { return [migrated] }
                        return [migrated, try await Outpost.run(["status", "--db", path])]
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            failures += results.filter { $0.status != 0 }.map { "round \(round): \($0.errorOutput)" }
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func auditVerifyPassesThenNamesTheEditedEntry() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        let store = try LocalStore.open(at: path)
        for index in 0..<4 { try await store.save(Issue(projectID: UUID(), title: "Issue \(index)")) }
        let intact = try await Outpost.run(["audit", "verify", "--db", path])
        #expect(intact.status == 0)
        #expect(intact.output.contains("intact: 4 entries"))

        let queue = try DatabaseQueue(path: path)
        try await queue.write { try $0.execute(sql: "UPDATE audit_log SET at = at + 1 WHERE seq = 2") }
        try queue.close()
        let broken = try await Outpost.run(["audit", "verify", "--db", path])
        #expect(broken.status != 0)
        #expect(broken.errorOutput.contains("broken at entry 2"))
    }

    /// A queued change pointed at another write's entry: the chain holds, the queue does not, and the
    /// command says so and fails (attack 59, finding 2).
    @Test func auditVerifyNamesAQueuedChangeThatDoesNotMatchItsEntry() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        let store = try LocalStore.open(at: path)
        for index in 0..<2 { try await store.save(Issue(projectID: UUID(), title: "Issue \(index)")) }
        let queue = try DatabaseQueue(path: path)
        try await queue.write { try $0.execute(sql: "UPDATE mutation_queue SET audit_seq = 2 WHERE seq = 1") }
        try queue.close()
        let result = try await Outpost.run(["audit", "verify", "--db", path])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("queued mutation 1"), "\(result.errorOutput)")
    }

    /// A file with a damaged page is reported damaged before anything writes to it: the chain's rows
    /// all read, so the walk alone said "intact" of a file SQLite's own check calls malformed, and the
    /// upgrade that opening runs first wrote to it (attack 77, finding 7).
    @Test func auditVerifyReportsADamagedFileAndLeavesItUnchanged() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        do {
            let store = try LocalStore.open(at: path)
            for index in 0..<40 {
                try await store.save(Issue(projectID: UUID(), title: String(repeating: "n", count: 200) + "\(index)"))
            }
        }
        // The file alone, checkpointed: the page written over is the one the file holds.
        let queue = try DatabaseQueue(path: path)
        let root = try await queue.writeWithoutTransaction { db -> Int in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            return try Int.fetchOne(db, sql: "SELECT rootpage FROM sqlite_master WHERE name = 'issues'") ?? 0
        }
        try queue.close()
        #expect(root > 1)
        let pageSize = 4096
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64((root - 1) * pageSize))
        try handle.write(contentsOf: Data(repeating: 0xFF, count: pageSize))
        try handle.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let result = try await Outpost.run(["audit", "verify", "--db", path])
        #expect(result.status == 1, "\(result.output)\(result.errorOutput)")
        #expect(result.errorOutput.contains("damaged"), "\(result.errorOutput)")
        #expect(!result.output.contains("intact"), "\(result.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "nothing was written to the damaged file")
    }

    @Test func storeCommandsNeverCreateAFile() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("absent.sqlite")
        #expect(try await Outpost.run(["status", "--db", path]).status != 0)
        #expect(try await Outpost.run(["audit", "verify", "--db", path]).status != 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

/// `outpost conflicts list` and `resolve` on a conflict made by a pull meeting a local change.
@Suite(.fieldService) struct ConflictCommandTests {
    @Test func listsAndResolvesAConflict() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        let store = try LocalStore.open(at: path)
        let issue = Issue(projectID: UUID(), title: "Leak", status: .open)
        let server = NodeID(0xFEED)
        func pulled(_ value: OutpostModels.Issue, version: Int64, at milliseconds: Int64) -> PulledPage {
            var record = value.record
            record.sync.version = version
            let stamp = HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server)
            return PulledPage(changes: [VersionedRecord(record: record, stampedAt: stamp)], cursor: "c-\(version)")
        }
        try await store.applyPulledPage(pulled(issue, version: 1, at: 1_000), now: Date(timeIntervalSince1970: 1))
        var mine = issue
        mine.status = .inProgress
        try await store.save(mine, now: Date(timeIntervalSince1970: 2))
        var theirs = issue
        theirs.status = .resolved
        try await store.applyPulledPage(pulled(theirs, version: 2, at: 5_000), now: Date(timeIntervalSince1970: 5))

        let list = try await Outpost.run(["conflicts", "list", "--db", path])
        #expect(list.status == 0)
        #expect(list.output.contains("issue") && list.output.contains("status"))
        #expect(list.output.contains("\"inProgress\"") && list.output.contains("\"resolved\""))
        let row = try #require(list.output.split(separator: "\n").first { $0.contains("\"inProgress\"") })
        #expect(row.hasSuffix("this device"), "the side whose value override brings back: \(row)")
        let id = try #require(try store.openConflicts().first?.id)

        let resolve = try await Outpost.run(["conflicts", "resolve", String(id), "--choice", "override", "--db", path])
        #expect(resolve.status == 0, "\(resolve.errorOutput)")
        #expect(try LocalStore.open(at: path).fetch(Issue.self, id: issue.id)?.status == .inProgress)
        #expect(try await Outpost.run(["conflicts", "list", "--db", path]).output.contains("no open conflicts"))
        #expect(try await Outpost.run(["conflicts", "resolve", String(id), "--choice", "discard", "--db", path]).status != 0)
    }
}
