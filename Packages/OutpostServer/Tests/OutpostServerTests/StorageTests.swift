import Foundation
import GRDB
import OutpostMigrator
import OutpostModels
@testable import OutpostServer
import OutpostStore
import OutpostSync
import Testing

@Suite("Storage: the SQLite file, its schema and its settings")
struct StorageTests {
    @Test("Idempotency survives a restart: the reopened file answers a replay with duplicates")
    func restartKeepsResults() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-storage-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("server.sqlite").path
        let caller = Caller(userID: TestServer.alice)
        let batch = [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]
        let first: [MutationResult]
        do {
            let storage = try SQLiteStorage(path: path, assignsServerIDs: false)
            try await storage.load(TestServer.seed, now: Timestamp.now())
            first = try await storage.push(batch, by: caller, now: Timestamp.now())
        }
        let reopened = try SQLiteStorage(path: path, assignsServerIDs: false)
        let replay = try await reopened.push(batch, by: caller, now: Timestamp.now())
        #expect(first[0].outcome.appliedVersion == 1)
        #expect(replay[0].outcome == .duplicate(original: first[0].outcome))
        // Someone else's key is neither applied nor answered with its result.
        let stolen = try await reopened.push(batch, by: Caller(userID: TestServer.bob), now: Timestamp.now())
        #expect(stolen[0].outcome.rejectedCode == .forbidden)
        let queue = try DatabaseQueue(path: path)
        #expect(try ServerSchema.migrator.appliedVersions(in: queue) == [1])
        try queue.close()
    }

    @Test("The default schema versions end at the device schema's latest version")
    func schemaVersionsFollowTheDevice() {
        let configuration = ServerConfiguration(databasePath: "unused.sqlite")
        #expect(configuration.schemaVersions.upperBound == LocalSchema.steps.count)
    }

    @Test("Settings the server cannot run with are refused before anything is opened", arguments: [
        ServerConfiguration(databasePath: "x.sqlite", port: 70_000),
        ServerConfiguration(databasePath: "x.sqlite", maximumBatchSize: 0),
        ServerConfiguration(databasePath: "x.sqlite", logLevel: "loud"),
    ])
    func invalidConfiguration(_ configuration: ServerConfiguration) {
        #expect(throws: ServerError.self) { _ = try SyncServer(configuration: configuration) }
        #expect(!FileManager.default.fileExists(atPath: "x.sqlite"))
    }

    @Test("A seed naming an unknown project or user is refused whole")
    func invalidSeed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-seed-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(path: folder.appendingPathComponent("s.sqlite").path, assignsServerIDs: false)
        let strayToken = ServerSeed(tokens: [.init(userID: UUID(), token: "long-enough-token")])
        let strayProject = ServerSeed(members: [.init(userID: UUID(), name: "Eve", projects: [UUID()])])
        for seed in [strayToken, strayProject] {
            await #expect(throws: ServerError.self) { try await storage.load(seed, now: Timestamp.now()) }
        }
        #expect(try await storage.caller(forTokenDigest: TokenDigest.hex(of: "long-enough-token")) == nil)
    }
}
