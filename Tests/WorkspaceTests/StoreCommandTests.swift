import Foundation
import GRDB
import OutpostModels
import OutpostStore
import Testing

/// `outpost status` and `outpost audit verify` on a store written through `LocalStore`.
@Suite struct StoreCommandTests {
    @Test func statusCountsPendingChanges() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        let store = try LocalStore.open(at: path)
        for index in 0..<3 { try await store.save(Issue(projectID: UUID(), title: "Issue \(index)")) }
        let result = try Outpost.run(["status", "--db", path, "--json"])
        #expect(result.status == 0)
        let json = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        #expect(json?["pendingChanges"] as? Int == 3)
        #expect(json?["openConflicts"] as? Int == 0)
    }

    @Test func auditVerifyPassesThenNamesTheEditedEntry() async throws {
        let folder = try TemporaryFolder()
        let path = folder.file("device.sqlite")
        let store = try LocalStore.open(at: path)
        for index in 0..<4 { try await store.save(Issue(projectID: UUID(), title: "Issue \(index)")) }
        let intact = try Outpost.run(["audit", "verify", "--db", path])
        #expect(intact.status == 0)
        #expect(intact.output.contains("intact: 4 entries"))

        let queue = try DatabaseQueue(path: path)
        try await queue.write { try $0.execute(sql: "UPDATE audit_log SET at = at + 1 WHERE seq = 2") }
        try queue.close()
        let broken = try Outpost.run(["audit", "verify", "--db", path])
        #expect(broken.status != 0)
        #expect(broken.errorOutput.contains("broken at entry 2"))
    }

    @Test func storeCommandsNeverCreateAFile() throws {
        let folder = try TemporaryFolder()
        let path = folder.file("absent.sqlite")
        #expect(try Outpost.run(["status", "--db", path]).status != 0)
        #expect(try Outpost.run(["audit", "verify", "--db", path]).status != 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
