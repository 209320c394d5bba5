@testable import OutpostServer
import Foundation
import GRDB
import Outpost
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

/// Nothing downloaded twice: a device that pre-synced a project from its server does not pull the
/// bundle's records again on its first sync (`PullRequest.bundlePositions`), against the real server.
@Suite("Nothing downloaded twice: a pre-synced device's first sync pulls only what changed after its bundle", .fieldService)
struct NothingTwiceTests {
    /// Alice's device with `count` issues of project A synced; returns it and the issues.
    static func alicesIssues(_ count: Int, on server: TestServer) async throws -> (Device, [OutpostModels.Issue]) {
        let alice = try device("alice-writer", on: server)
        var issues: [OutpostModels.Issue] = []
        for index in 0..<count {
            issues.append(try await alice.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Issue \(index)")))
        }
        let report = try await alice.sync()
        #expect(report.pushed == count, "\(report)")
        return (alice, issues)
    }

    static func issues(on device: Device) throws -> [OutpostModels.Issue] {
        try device.records(OutpostModels.Issue.self, where: "projectID", is: .uuid(TestServer.projectA))
    }

    static func device(_ name: String, on server: TestServer, token: String = TestServer.aliceToken) throws -> Device {
        try Device(
            path: server.directory.appendingPathComponent("\(name)-\(UUID().uuidString).sqlite").path, app: .fieldService,
            transport: server.transport(token: token))
    }

    @Test("A pre-synced device pulls none of its bundle's records, then exactly what changed after it; a device that synced first pulls as before", arguments: Backend.available)
    func aPreSyncedDevicePullsNothingItHolds(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let (writer, issues) = try await Self.alicesIssues(40, on: server)

        // What a device that never pre-synced pulls: every record of the project.
        let fresh = try Self.device("alice-fresh", on: server)
        let full = try await fresh.sync()
        #expect(full.pulled > 40, "\(full)")

        let transport = server.transport(token: TestServer.aliceToken)
        let presynced = try Device(
            path: server.directory.appendingPathComponent("alice-presynced.sqlite").path, app: .fieldService, transport: transport)
        let imported = try await presynced.preSync(project: TestServer.projectA)
        #expect(imported.total.inserted == full.pulled, "\(imported)")
        #expect(try presynced.store.bundlePositions().count == 1)
        // Its versions are the server's (downloaded over the device's own connection), not the bundle's word.
        #expect(try await DatabaseQueue(path: presynced.store.path).read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM imported_versions") } == 0)

        // Two edits after the bundle was made: the first sync pulls those two and nothing else.
        var edited = issues[3]
        edited.title = "Edited after the bundle"
        try await writer.save(edited)
        try await writer.delete(issues[7])
        try await writer.sync()
        let before = await transport.transferred
        let first = try await presynced.sync()
        #expect(first.pulled == 2, "\(first)")
        #expect(try presynced.store.bundlePositions().isEmpty, "a page applied forgets the positions it sent")
        let bytes = await transport.transferred.since(before).bytesReceived
        #expect(try presynced.fetch(OutpostModels.Issue.self, id: edited.id)?.title == "Edited after the bundle")
        #expect(try !Self.issues(on: presynced).contains { $0.id == issues[7].id })

        // And from then on, only what changed.
        let second = try await presynced.sync()
        #expect(second.pulled == 0, "\(second)")
        // The same holds as a fresh device's pull of everything: what it holds is what the server has.
        let reference = try Self.device("alice-reference", on: server)
        try await reference.sync()
        #expect(try Self.issues(on: presynced).map(\.title).sorted() == Self.issues(on: reference).map(\.title).sorted())

        // A device whose user is removed between its pre-sync and its first sync is told so.
        let removed = try Device(
            path: server.directory.appendingPathComponent("carol-removed.sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.carolToken))
        try await removed.preSync(project: TestServer.projectA)
        #expect(try await server.server.removeMember(TestServer.carol, from: TestServer.projectA))
        let told = try await removed.sync()
        #expect(told.leftProjects == [TestServer.projectA], "\(told)")
        #expect(try removed.store.status().leftProjects == [TestServer.projectA])

        // A device that already held the project keeps no position (the bundle lacks deleted records,
        // which only its pull tells), and pulls as before.
        try await fresh.preSync(project: TestServer.projectA)
        #expect(try fresh.store.bundlePositions().isEmpty)
        #expect(bytes < 20_000, "the first sync received \(bytes) bytes")
        await server.stop()
    }

    @Test("Every kind of record a pre-sync brings reads back as the server has it, with server ids too: a time entry pair, an issue", arguments: [OutpostWire.BundleFormat.json, OutpostWire.BundleFormat.xml])
    func everyKindReadsBack(_ format: OutpostWire.BundleFormat) async throws {
        // Server ids (xml) and client ids (json): a bundle of server ids keeps no position, since its
        // references are linked by the pull that names each record's server id.
        let server = try await TestServer.start(.sqlite, assignsServerIDs: format == .xml)
        let writer = try Self.device("alice-day", on: server)
        try await writer.sync()
        let member = try #require(try writer.member(for: TestServer.alice, in: TestServer.projectA))
        let clockIn = try await writer.clockIn(member: member.id, project: TestServer.projectA)
        let clockOut = try await writer.clockOut(of: clockIn)
        try await writer.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Loose rail"))
        try await writer.sync()

        let presynced = try Self.device("alice-morning", on: server)
        try await presynced.preSync(project: TestServer.projectA, format: format)
        #expect(try presynced.store.bundlePositions().count == (format == .xml ? 0 : 1))
        try await presynced.sync()
        // Read as any record of the store, as a screen or an edit reads it: every reference a client id.
        for id in [clockIn.id, clockOut.id] {
            #expect(try presynced.store.record(.timeEntry, id: id)?.validationErrors.isEmpty == true)
        }
        let reference = try Self.device("alice-pulled", on: server)
        try await reference.sync()
        for id in [clockIn.id, clockOut.id] {
            let read = try #require(try presynced.fetch(TimeEntry.self, id: id))
            #expect(read == (try reference.fetch(TimeEntry.self, id: id)))
        }
        #expect(try Self.issues(on: presynced).map(\.title) == Self.issues(on: reference).map(\.title))
        await server.stop()
    }

    @Test("A position the server's history does not hold is answered history_changed (the device rebuilds); one of a project the caller is not in comes back as left, as any made-up id does")
    func aPositionTheServerDoesNotHoldIsAChangedHistory() async throws {
        let server = try await TestServer.start(.sqlite)
        _ = try await Self.alicesIssues(10, on: server)
        let fresh = try Self.device("alice-fresh", on: server)
        let full = try await fresh.sync().pulled

        let presynced = try Self.device("alice-forged", on: server)
        try await presynced.preSync(project: TestServer.projectA)
        let position = try #require(presynced.store.bundlePositions().first)
        // The same sequence with another mark: a history restored since, or a position no bundle carried.
        let forged = String(position.dropLast(16)) + String(repeating: "0", count: 16)
        try await DatabaseQueue(path: presynced.store.path).write { db in
            try db.execute(sql: "UPDATE sync_state SET value = ? WHERE key = 'bundle_positions'", arguments: [forged])
        }
        let report = try await presynced.sync()
        #expect(report.historyChanged && report.pulled == full)
        #expect(try presynced.store.bundlePositions().isEmpty)
        let refused = await #expect(throws: TransportError.self) {
            _ = try await server.transport(token: TestServer.bobToken).pull(PullRequest(cursor: nil, limit: 5, bundlePositions: [forged]))
        }
        #expect(refused?.status == 409 && refused?.serverCode == .historyChanged, "whoever sends it, whatever the project")

        // Bob is not a member of A: A's position (a real one) brings him nothing of A, and A comes back as
        // a project he is not in, exactly as a made-up id does: nothing tells whether A exists.
        let transport = server.transport(token: TestServer.bobToken)
        let plain = try await transport.pull(PullRequest(cursor: nil, limit: 500))
        let named = try await transport.pull(PullRequest(cursor: nil, limit: 500, bundlePositions: [position]))
        #expect(named.changes.map(\.recordID) == plain.changes.map(\.recordID))
        // Their cursors differ only in the checkpoint sealed in them: the position Bob sent, which this
        // history holds (tells him nothing he did not send).
        func positions(_ cursor: String) -> Substring { CursorSeal.parts(of: cursor).body.prefix { $0 != "!" } }
        #expect(named.leftProjects == [TestServer.projectA] && positions(named.nextCursor) == positions(plain.nextCursor))
        let madeUp = UUID()
        let made = try await transport.pull(
            PullRequest(cursor: nil, limit: 500, bundlePositions: [madeUp.uuidString.lowercased() + String(position.dropFirst(36))]))
        #expect(made.changes.map(\.recordID) == plain.changes.map(\.recordID) && made.leftProjects == [madeUp])
        // Text that is not a position is a bad request, as the API document's pattern says.
        for bad in ["x", position + "0", String(position.dropFirst())] {
            let refused = await #expect(throws: TransportError.self) {
                _ = try await transport.pull(PullRequest(cursor: nil, limit: 5, bundlePositions: [bad]))
            }
            #expect(refused?.status == 400, "\(bad)")
        }
        await server.stop()
    }

    @Test("A bundle file handed over keeps no position and stays the bundle's word; a pull confirms it")
    func aFileImportKeepsNoPosition() async throws {
        let server = try await TestServer.start(.sqlite)
        _ = try await Self.alicesIssues(5, on: server)
        let downloader = try Self.device("alice-downloader", on: server)
        let file = server.directory.appendingPathComponent("a.json")
        _ = try await server.transport(token: TestServer.aliceToken).downloadBundle(project: TestServer.projectA, format: .json, to: file)
        let receiver = try Self.device("alice-receiver", on: server)
        let summary = try receiver.importBundle(at: file)
        #expect(try receiver.store.bundlePositions().isEmpty)
        #expect(try await DatabaseQueue(path: receiver.store.path).read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM imported_versions") }
            == summary.total.inserted)
        #expect(try await receiver.sync().pulled == summary.total.inserted)
        _ = downloader
        await server.stop()
    }

    @Test("A device is sent back its own accepted changes as versions only: the sync after a push pulls none of their fields, fires no change, and a teammate's later edit still comes whole", arguments: Backend.available)
    func ownChangesComeBackAsVersionsOnly(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let (teammate, seeded) = try await Self.alicesIssues(3, on: server)
        let transport = server.transport(token: TestServer.aliceToken)
        let device = try Device(
            path: server.directory.appendingPathComponent("alice-own.sqlite").path, app: .fieldService, transport: transport)
        try await device.sync()
        var created: [OutpostModels.Issue] = []
        for index in 0..<50 {
            created.append(try await device.save(OutpostModels.Issue(projectID: TestServer.projectA, title: "Own \(index)")))
        }
        var edited = seeded[0]
        edited.title = "Edited by this device"
        try await device.save(edited)
        #expect(try await device.sync().pushed == 51)
        #expect(try !device.store.ownSequences().isEmpty)

        let heard = ChangeCounter(device.store)
        let before = await transport.transferred
        let next = try await device.sync()
        let received = await transport.transferred.since(before).bytesReceived
        #expect(next.pulled == 0, "\(next)")
        #expect(next.quarantined == 0, "\(next)")
        #expect(await heard.count() == 0, "a pull that changed nothing fired changes()")
        #expect(try device.store.ownSequences().isEmpty, "a completed pull forgets the sequences it passed")
        #expect(received < 10_000, "the sync after the push received \(received) bytes")

        // A teammate's edit of one of them after the push comes whole, and the others stay as they are.
        try await teammate.sync()
        var theirs = try #require(try teammate.fetch(OutpostModels.Issue.self, id: created[5].id))
        theirs.title = "Edited by a teammate"
        try await teammate.save(theirs)
        try await teammate.sync()
        let after = try await device.sync()
        #expect(after.pulled == 1, "\(after)")
        #expect(try device.fetch(OutpostModels.Issue.self, id: created[5].id)?.title == "Edited by a teammate")
        let reference = try Self.device("alice-reference", on: server)
        try await reference.sync()
        #expect(try Self.issues(on: device).map(\.title).sorted() == Self.issues(on: reference).map(\.title).sorted())
        await server.stop()
    }

    @Test("Malformed own sequences are a bad request; claimed ones only hold back the fields of what the caller may see anyway")
    func ownSequencesAreChecked() async throws {
        let server = try await TestServer.start(.sqlite)
        let transport = server.transport(token: TestServer.aliceToken)
        for bad in [["0"], ["5-03"], ["x"], ["1-2-3"], Array(repeating: "1", count: 257)] {
            let refused = await #expect(throws: TransportError.self) {
                _ = try await transport.pull(PullRequest(cursor: nil, limit: 5, ownSequences: bad))
            }
            #expect(refused?.status == 400, "\(bad.prefix(2))")
        }
        // Another user's sequences name changes of records the caller cannot see: they change nothing.
        _ = try await Self.alicesIssues(2, on: server)
        let bob = server.transport(token: TestServer.bobToken)
        let plain = try await bob.pull(PullRequest(cursor: nil, limit: 500))
        let claimed = try await bob.pull(PullRequest(cursor: nil, limit: 500, checkpoint: plain.checkpoint, ownSequences: ["1-999999"]))
        #expect(claimed.changes.isEmpty && claimed.ownRecords.map(\.recordID) == plain.changes.map(\.recordID))
        // Past the checkpoint the request carries (none here) a sequence is no one's own (attack 97).
        let unchecked = try await bob.pull(PullRequest(cursor: nil, limit: 500, ownSequences: ["1-999999"]))
        #expect(unchecked.ownRecords.isEmpty && unchecked.changes.map(\.recordID) == plain.changes.map(\.recordID))
        await server.stop()
    }
}

/// Counts what a store's `changes()` publishes.
actor ChangeCounter {
    private var seen = 0

    init(_ store: LocalStore) {
        let stream = store.changes()
        Task { await self.listen(to: stream) }
    }

    private func listen(to stream: AsyncStream<StoreChange>) async {
        for await _ in stream { seen += 1 }
    }

    func count() -> Int { seen }
}
