@testable import OutpostServer
import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire
import Testing

@Suite("End to end: the real SyncEngine and HTTPTransport against the server", .fieldService)
struct EndToEndTests {
    static func record(_ entity: EntityType, _ fields: [String: FieldValue], id: UUID = UUID()) -> EntityRecord {
        EntityRecord(entity: entity, id: id, fields: fields, sync: SyncMetadata(createdAt: Timestamp.now()))
    }

    /// An estimate graph as a device creates it offline: opportunity → project → scope → sheet → measure
    /// → item, plus money records under the project.
    static func estimateGraph() -> [EntityRecord] {
        let opportunity = record(.opportunity, [
            "name": .text("Kitchen remodel"), "customerName": .text("R. Diaz"), "address": .text("9 Elm"),
            "stage": .text("proposal"), "estimatedValueCents": .integer(4_200_000),
        ])
        let project = record(.project, [
            "opportunityID": .uuid(opportunity.id), "name": .text("Diaz kitchen"), "number": .null,
            "address": .text("9 Elm"), "status": .text("planned"), "startDay": .text("2026-12-01"),
        ])
        let scope = record(.scope, [
            "projectID": .uuid(project.id), "name": .text("Cabinets"), "notes": .text(""), "sortOrder": .integer(1),
        ])
        let sheet = record(.measureSheet, ["scopeID": .uuid(scope.id), "name": .text("Walls"), "notes": .text("")])
        let measure = record(.measure, [
            "measureSheetID": .uuid(sheet.id), "label": .text("North wall"), "quantity": .real(12.5),
            "unit": .text("ft"), "sortOrder": .integer(1),
        ])
        let item = record(.scopeItem, [
            "scopeID": .uuid(scope.id), "measureID": .uuid(measure.id), "name": .text("Base cabinet"),
            "quantity": .real(4), "unit": .text("ea"), "unitPriceCents": .integer(45_000), "sortOrder": .integer(1),
        ])
        let discount = record(.discount, [
            "projectID": .uuid(project.id), "name": .text("Winter"), "kind": .text("percentage"), "value": .integer(500),
        ])
        let fee = record(.fee, [
            "projectID": .uuid(project.id), "name": .text("Permit"), "amountCents": .integer(15_000),
            "isTaxable": .bool(false),
        ])
        return [opportunity, project, scope, sheet, measure, item, discount, fee]
    }

    @Test("An estimate graph created offline syncs in --server-ids mode; every temp id is replaced and a second device gets the same graph", arguments: Backend.available)
    func estimateGraphWithServerIDs(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, assignsServerIDs: true)
        let folder = server.directory
        let device = try LocalStore.open(at: folder.appendingPathComponent("device.sqlite").path)
        let graph = Self.estimateGraph()
        for record in graph { _ = try await device.save(record) }
        let engine = SyncEngine(store: device, transport: server.transport(token: TestServer.aliceToken), batchSize: 3)
        let report = try await engine.sync()
        #expect(report.isComplete)
        #expect(report.pushed == graph.count)
        #expect(report.failed == 0)
        #expect(try device.status().pendingChanges == 0)
        var serverIDs: Set<String> = []
        for record in graph {
            let serverID = try #require(try device.serverID(of: record.entity, clientID: record.id))
            #expect(Int(serverID) != nil)
            serverIDs.insert(serverID)
        }
        #expect(serverIDs.count == graph.count)

        // On the wire, references are the server's ids.
        let page = try await server.transport(token: TestServer.aliceToken).pull(PullRequest(cursor: nil, limit: 1000))
        let wireItem = try #require(page.changes.first { $0.recordID == graph[5].id })
        #expect(wireItem.fields["scopeID"] == .text(try #require(try device.serverID(of: .scope, clientID: graph[2].id))))

        // A second device, another member, pulls the same graph back with client ids everywhere.
        let other = try LocalStore.open(at: folder.appendingPathComponent("other.sqlite").path)
        let second = SyncEngine(store: other, transport: server.transport(token: TestServer.aliceToken), pullLimit: 2)
        #expect(try await second.sync().isComplete)
        for record in graph {
            let copy = try #require(try other.record(record.entity, id: record.id), "\(record.entity) missing")
            #expect(copy.fields == record.fields, "\(record.entity)")
            #expect(copy.sync.serverID == (try device.serverID(of: record.entity, clientID: record.id)))
            #expect(!copy.sync.isOrphaned)
        }
        await server.stop()
    }

    @Test("Pull pages see every change exactly once while another client pushes", arguments: Backend.available)
    func paginationDuringPushes(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend, maximumPullLimit: 5)
        let writer = server.transport(token: TestServer.aliceToken)
        let reader = server.transport(token: TestServer.carolToken)
        let ids = (0..<60).map { _ in UUID() }
        let pushes = Task {
            for chunk in stride(from: 0, to: ids.count, by: 4) {
                let mutations = ids[chunk..<min(chunk + 4, ids.count)].map {
                    Sample.create(.issue, id: $0, fields: Sample.issueFields(project: TestServer.projectA))
                }
                _ = try await writer.push(PushRequest(mutations: mutations))
            }
        }
        var seen: [UUID: Int] = [:]
        var cursor: String?
        var lastSequence: Int64 = 0
        var pushesDone = false
        for _ in 0..<1000 {
            let page = try await reader.pull(PullRequest(cursor: cursor, limit: 50))
            #expect(page.changes.count <= 5)
            for change in page.changes {
                #expect(change.sequence > lastSequence)
                lastSequence = change.sequence
                seen[change.recordID, default: 0] += 1
            }
            cursor = page.nextCursor
            if !page.hasMore {
                if pushesDone { break }
                pushesDone = (try? await pushes.value) != nil || pushes.isCancelled
            }
        }
        try await pushes.value
        #expect(Set(ids).isSubset(of: Set(seen.keys)))
        #expect(ids.allSatisfy { seen[$0] == 1 })
        await server.stop()
    }

    @Test("A pull page stops after the change that brings it to the byte cap; a change over the cap comes alone; none is skipped", arguments: Backend.available)
    func pullPagesStopAtTheByteCap(_ backend: Backend) async throws {
        let cap = 4_000
        let server = try await TestServer.start(backend, maximumPullPageBytes: cap)
        let writer = server.transport(token: TestServer.aliceToken)
        let sizes = [1_000, 1_000, 1_000, 1_000, 1_000, 10_000, 1_000, 1_000, 1_000, 1_000, 1_000]
        let ids = sizes.map { _ in UUID() }
        let mutations = zip(ids, sizes).map { id, size in
            var fields = Sample.issueFields(project: TestServer.projectA)
            fields["details"] = .text(String(repeating: "d", count: size))
            return Sample.create(.issue, id: id, fields: fields)
        }
        _ = try await writer.push(PushRequest(mutations: mutations))

        var seen: [UUID] = []
        var pages: [[ServerRecord]] = []
        var cursor: String?
        var lastSequence: Int64 = 0
        while true {
            let page = try await writer.pull(PullRequest(cursor: cursor, limit: 100))
            #expect(!page.changes.isEmpty)
            for change in page.changes {
                #expect(change.sequence > lastSequence)
                lastSequence = change.sequence
            }
            seen += page.changes.map(\.recordID)
            pages.append(page.changes)
            cursor = page.nextCursor
            if !page.hasMore { break }
        }
        #expect(Set(seen).count == seen.count, "a change came twice")
        #expect(Set(ids).isSubset(of: Set(seen)))
        func detailsLength(_ change: ServerRecord) -> Int {
            if case .text(let text) = change.fields["details"] ?? .null { text.count } else { 0 }
        }
        // Every page but its last change stays under the cap (stored JSON is longer than the details),
        // and every page but the last reaches it (a change's other fields and clocks are under 2,000 bytes).
        for page in pages { #expect(page.dropLast().map(detailsLength).reduce(0, +) < cap) }
        for page in pages.dropLast() { #expect(page.map { detailsLength($0) + 2_000 }.reduce(0, +) >= cap, "\(page.count)") }
        #expect(pages.count >= 4, "\(pages.map(\.count))")
        let big = try #require(pages.first { $0.contains { $0.recordID == ids[5] } })
        #expect(big.last?.recordID == ids[5], "the change over the cap ends its page")
        #expect(pages.first { $0.first?.recordID == ids[6] } != nil, "the next page starts right after it")
        await server.stop()
    }

    @Test("A media upload cut half-way resumes from the server's offset; the SHA-256 is checked at the end", arguments: Backend.available)
    func resumableMedia(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let alice = server.transport(token: TestServer.aliceToken)
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let digest = sha256Hex(bytes)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let attachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: bytes))
        _ = try await alice.push(PushRequest(mutations: [issue, attachment]))
        let id = attachment.recordID
        #expect(try await alice.mediaUploadStatus(for: id).receivedBytes == 0)
        _ = try await alice.uploadMedia(MediaChunk(
            attachmentID: id, offset: 0, totalBytes: Int64(bytes.count), sha256: digest, data: bytes.prefix(40_000)))
        // The connection drops; a new transport asks where to resume.
        let resumed = server.transport(token: TestServer.aliceToken)
        let status = try await resumed.mediaUploadStatus(for: id)
        #expect(status.receivedBytes == 40_000)
        #expect(!status.complete)
        await #expect(throws: TransportError.self) {
            _ = try await resumed.uploadMedia(MediaChunk(
                attachmentID: id, offset: 50_000, totalBytes: Int64(bytes.count), sha256: digest,
                data: bytes.subdata(in: 50_000..<60_000)))
        }
        let done = try await resumed.uploadMedia(MediaChunk(
            attachmentID: id, offset: 40_000, totalBytes: Int64(bytes.count), sha256: digest,
            data: bytes.subdata(in: 40_000..<100_000)))
        #expect(done.complete)
        #expect(done.receivedBytes == Int64(bytes.count))
        let stored = try Data(contentsOf: URL(fileURLWithPath: server.server.configuration.mediaDirectory)
            .appendingPathComponent(id.uuidString.lowercased()))
        #expect(stored == bytes)

        // Bytes that do not hash to the record's digest are refused and dropped.
        let other = Data(repeating: 7, count: 10)
        let liar = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: other))
        _ = try await alice.push(PushRequest(mutations: [liar]))
        do {
            _ = try await alice.uploadMedia(MediaChunk(
                attachmentID: liar.recordID, offset: 0, totalBytes: 10, sha256: sha256Hex(other),
                data: Data(repeating: 8, count: 10)))
            Issue.record("a corrupted file was accepted")
        } catch {
            #expect(error.serverCode == .checksumMismatch)
            #expect(error.status == 422)
        }
        #expect(try await alice.mediaUploadStatus(for: liar.recordID).receivedBytes == 0)
        await server.stop()
    }

    @Test("Only the attachment's creator uploads its file, one chunk at a time, and never for a deleted attachment", arguments: Backend.available)
    func mediaUploadsBelongToTheirCreator(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let carol = server.transport(token: TestServer.carolToken)
        let bytes = Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let digest = sha256Hex(bytes)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let attachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: bytes))
        _ = try await alice.push(PushRequest(mutations: [issue, attachment]))
        let id = attachment.recordID
        _ = try await alice.uploadMedia(MediaChunk(
            attachmentID: id, offset: 0, totalBytes: Int64(bytes.count), sha256: digest, data: bytes.prefix(5_000)))

        // Carol, a member of the same project, cannot write the owner's next bytes.
        do {
            _ = try await carol.uploadMedia(MediaChunk(
                attachmentID: id, offset: 5_000, totalBytes: Int64(bytes.count), sha256: digest, data: Data(repeating: 0, count: 5_000)))
            Issue.record("a co-member's chunk was taken")
        } catch {
            #expect(error.serverCode == .forbidden)
        }
        #expect(try await alice.mediaUploadStatus(for: id).receivedBytes == 5_000)

        // Sixteen copies of the next chunk at once: exactly one is stored.
        let accepted = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let sender = server.transport(token: TestServer.aliceToken)
                    return (try? await sender.uploadMedia(MediaChunk(
                        attachmentID: id, offset: 5_000, totalBytes: Int64(bytes.count), sha256: digest,
                        data: bytes.subdata(in: 5_000..<10_000)))) != nil
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(accepted == 1)
        #expect(try await alice.mediaUploadStatus(for: id).receivedBytes == 10_000)
        let done = try await alice.uploadMedia(MediaChunk(
            attachmentID: id, offset: 10_000, totalBytes: Int64(bytes.count), sha256: digest, data: bytes.suffix(from: 10_000)))
        #expect(done.complete)

        // A deleted attachment's file is no longer taken.
        let gone = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: bytes))
        _ = try await alice.push(PushRequest(mutations: [gone]))
        var deletion = Sample.update(.mediaAttachment, id: gone.recordID, baseVersion: 1, fields: [:], clock: Sample.clock(60_000))
        deletion.operation = .delete
        deletion.deletion = Sample.clock(60_000)
        let deleted = try await alice.push(PushRequest(mutations: [deletion])).results
        #expect(deleted.first?.outcome.appliedVersion == 2)
        do {
            _ = try await alice.uploadMedia(MediaChunk(
                attachmentID: gone.recordID, offset: 0, totalBytes: Int64(bytes.count), sha256: digest, data: bytes))
            Issue.record("a deleted attachment's file was taken")
        } catch {
            #expect(error.serverCode == .notFound)
        }
        // Nor is its upload's state, its size included, shown to anyone.
        do {
            _ = try await server.transport(token: TestServer.carolToken).mediaUploadStatus(for: gone.recordID)
            Issue.record("a deleted attachment's upload status was shown")
        } catch {
            #expect(error.serverCode == .notFound)
        }
    }

    @Test("An upload left unfinished for a week gives its disk space back and starts again from 0", arguments: Backend.available)
    func abandonedUploadsExpire(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        let alice = server.transport(token: TestServer.aliceToken)
        let bytes = Data(repeating: 9, count: 30_000)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let attachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: bytes))
        _ = try await alice.push(PushRequest(mutations: [issue, attachment]))
        let id = attachment.recordID
        _ = try await alice.uploadMedia(MediaChunk(
            attachmentID: id, offset: 0, totalBytes: Int64(bytes.count), sha256: sha256Hex(bytes), data: bytes.prefix(10_000)))
        let part = URL(fileURLWithPath: server.server.configuration.mediaDirectory).appendingPathComponent(id.uuidString.lowercased() + ".part")
        #expect(await server.server.media.sweep(now: Timestamp.now()) == 0, "a fresh upload stays")
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-8 * 24 * 3600)], ofItemAtPath: part.path)
        #expect(await server.server.media.sweep(now: Timestamp.now()) == 1)
        #expect(!FileManager.default.fileExists(atPath: part.path))
        #expect(try await alice.mediaUploadStatus(for: id).receivedBytes == 0)
    }

    @Test("The bundle route streams a valid JSON and XML bundle of the project that imports on a device", arguments: [BundleFormat.json, .xml], Backend.available)
    func bundles(format: BundleFormat, backend: Backend) async throws {
        let server = try await TestServer.start(backend, assignsServerIDs: true)
        let device = try LocalStore.open(at: server.directory.appendingPathComponent("device.sqlite").path)
        let graph = Self.estimateGraph()
        for record in graph { _ = try await device.save(record) }
        #expect(try await SyncEngine(store: device, transport: server.transport(token: TestServer.aliceToken)).sync().isComplete)
        let projectID = graph[1].id
        let file = server.directory.appendingPathComponent("bundle.\(format.rawValue)")
        let size = try await server.transport(token: TestServer.aliceToken).downloadBundle(
            project: projectID, format: format, to: file)
        #expect(size > 0)
        #expect(BundleValidator().errors(inBundleAt: file).isEmpty)
        let fresh = server.directory.appendingPathComponent("fresh.sqlite").path
        let imported = try LocalStore.open(at: fresh)
        let summary = try imported.importBundle(at: file)
        #expect(summary.total.inserted == graph.count + 1, "and the new project's member record, its creator's")
        for record in graph {
            #expect(try imported.record(record.entity, id: record.id)?.fields == record.fields)
        }
        await server.stop()
    }
}
