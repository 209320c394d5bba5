@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// `outpost sync` against `outpost serve`, both as child processes, the way the crash tests run them.
@Suite("outpost sync", .fieldService)
struct SyncCommandTests {
    static let project = UUID(uuidString: "a0000000-0000-4000-8000-00000000000a")!

    /// Starts `outpost serve` with one project and Alice's token; returns the process and its port.
    static func startServer(in folder: URL) async throws -> (Process, Int) {
        let user = "a11ce000-0000-4000-8000-000000000001"
        let seed = """
            {"projects": [{"id": "\(project.uuidString.lowercased())", "name": "Maple Street"}],
             "members": [{"userID": "\(user)", "name": "Alice", "projects": ["\(project.uuidString.lowercased())"]}],
             "tokens": [{"userID": "\(user)", "token": "alice-token"}]}
            """
        let seedFile = folder.appendingPathComponent("seed.json")
        try Data(seed.utf8).write(to: seedFile)
        let process = Process()
        process.executableURL = Outpost.executable
        process.arguments = ["serve", "--db", folder.appendingPathComponent("server.sqlite").path, "--port", "0", "--seed", seedFile.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = await ChildProcess.firstLine(of: output)
        guard let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            process.terminate()
            throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "serve printed: \(line)"])
        }
        return (process, port)
    }

    /// A new folder holding a device database with one issue queued; the caller removes the folder.
    static func deviceWithOneChange() async throws -> (folder: URL, db: String, store: LocalStore) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-sync-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let db = folder.appendingPathComponent("device.sqlite").path
        let store = try LocalStore.open(at: db)
        try await store.save(Issue(projectID: project, title: "Cracked sill"))
        return (folder, db, store)
    }

    @Test func aRunSendsTheQueueAndAnUnreachableServerLeavesItQueued() async throws {
        let (folder, db, _) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }

        // No server yet: exit 2, the change still waits.
        let offline = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:9", "--token", "alice-token"])
        #expect(offline.status == 2, "\(offline.output)\(offline.errorOutput)")
        #expect(try LocalStore.open(at: db).status().pendingChanges == 1)
        // What waits can be listed, and printed whole to hand over.
        let unsent = try await Outpost.run(["unsent", "--db", db])
        #expect(unsent.output.hasPrefix("1 unsent change\n"), "\(unsent.output)\(unsent.errorOutput)")
        let whole = try await Outpost.run(["unsent", "--db", db, "--json"])
        let changes = try #require(try JSONSerialization.jsonObject(with: Data(whole.output.utf8)) as? [[String: Any]])
        #expect(changes.count == 1 && (changes.first?["fields"] as? [String: Any])?.isEmpty == false)

        let (server, port) = try await Self.startServer(in: folder)
        defer { server.terminate() }
        let online = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:\(port)", "--token", "alice-token", "--json"])
        #expect(online.status == 0, "\(online.output)\(online.errorOutput)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(online.output.utf8)) as? [String: String])
        #expect(report["pushed"] == "1")
        #expect(report["pendingChanges"] == "0")

        let refused = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:\(port)", "--token", "wrong"])
        #expect(refused.status == 2)
        #expect(refused.output.contains("paused: credentialsRejected"))
    }

    @Test func retryFailedSendsAFailedChangeAgain() async throws {
        let (folder, db, store) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The change failed (its retries ran out in a long outage, say).
        let claimed = try #require(try store.claimMutations(limit: 1, now: Date()).first)
        try store.fail(claimed, reason: "timed out 11 times")
        let (server, port) = try await Self.startServer(in: folder)
        defer { server.terminate() }
        let url = "http://127.0.0.1:\(port)"
        let plain = try await Outpost.run(["sync", "--db", db, "--server", url, "--token", "alice-token", "--json"])
        let before = try #require(try JSONSerialization.jsonObject(with: Data(plain.output.utf8)) as? [String: String])
        #expect(before["pushed"] == "0", "a failed change stays failed until asked")
        #expect(try LocalStore.open(at: db).status().failedChanges == 1)

        let retried = try await Outpost.run(["sync", "--db", db, "--server", url, "--token", "alice-token", "--retry-failed", "--json"])
        #expect(retried.status == 0, "\(retried.output)\(retried.errorOutput)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(retried.output.utf8)) as? [String: String])
        #expect(report["retriedFailed"] == "1")
        #expect(report["pushed"] == "1")
        #expect(try LocalStore.open(at: db).status().failedChanges == 0)
    }
}
