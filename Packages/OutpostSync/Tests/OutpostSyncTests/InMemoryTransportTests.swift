import Foundation
import OutpostModels
import OutpostWire
import Testing
@testable import OutpostSync

@Suite struct InMemoryTransportTests {
    private func applied(_ response: PushResponse) -> [MutationOutcome] {
        response.results.map(\.outcome)
    }

    @Test func aCreateIsAppliedAndPulledBack() async throws {
        let server = InMemoryTransport()
        let create = Fixtures.createIssue()
        let response = try await server.push(PushRequest(mutations: [create]))
        #expect(response.results == [MutationResult(idempotencyKey: create.idempotencyKey, outcome: .applied(version: 1, serverID: nil))])
        let page = try await server.pull(PullRequest(cursor: nil, limit: 10))
        #expect(page.changes.map(\.recordID) == [create.recordID])
        #expect(page.changes.first?.fields == create.fields && page.changes.first?.clocks == create.clocks)
        #expect(page.nextCursor == "1" && !page.hasMore)
        let empty = try await server.pull(PullRequest(cursor: page.nextCursor, limit: 10))
        #expect(empty.changes.isEmpty && empty.nextCursor == "1")
    }

    @Test func aKeyIsAppliedAtMostOnceEvenWhenTheResponseIsLost() async throws {
        let server = InMemoryTransport()
        await server.inject(.dropResponse, on: .push)
        let create = Fixtures.createIssue()
        await #expect(throws: TransportError.self) { try await server.push(PushRequest(mutations: [create])) }
        #expect(await server.record(create.recordID)?.version == 1)
        let retry = try await server.push(PushRequest(mutations: [create]))
        #expect(applied(retry) == [.duplicate(original: .applied(version: 1, serverID: nil))])
        #expect(await server.record(create.recordID)?.version == 1)
        #expect(await server.record(create.recordID)?.sequence == 1)
    }

    @Test func aDroppedRequestAppliesNothing() async throws {
        let server = InMemoryTransport()
        await server.inject(.dropRequest)
        let create = Fixtures.createIssue()
        do {
            _ = try await server.push(PushRequest(mutations: [create]))
            Issue.record("expected a failure")
        } catch {
            #expect(error.code == .noConnection)
        }
        #expect(await server.record(create.recordID) == nil)
    }

    @Test func aStaleBaseVersionGetsAConflictWithTheServerRecord() async throws {
        let server = InMemoryTransport()
        let create = Fixtures.createIssue()
        await server.apply(create)
        let remote = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: create.recordID, baseVersion: 1,
            fields: ["title": .text("Remote")], clocks: ["title": Fixtures.clock(1_770_000_001_000)])
        #expect(await server.apply(remote) == .applied(version: 2, serverID: nil))
        var local = remote
        local.idempotencyKey = UUID()
        local.fields = ["status": .text("closed")]
        local.clocks = ["status": Fixtures.clock(1_770_000_002_000)]
        let response = try await server.push(PushRequest(mutations: [local]))
        guard case .conflict(let record) = response.results.first?.outcome else {
            Issue.record("expected a conflict, got \(response)")
            return
        }
        #expect(record.version == 2 && record.fields["title"] == .text("Remote"))
        local.baseVersion = 2
        local.idempotencyKey = UUID()
        #expect(applied(try await server.push(PushRequest(mutations: [local]))) == [.applied(version: 3, serverID: nil)])
    }

    @Test func serverIDsAreAssignedToCreatesOnly() async throws {
        let server = InMemoryTransport(assignsServerIDs: true)
        let first = Fixtures.createIssue()
        let second = Fixtures.createIssue()
        let update = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: first.recordID, baseVersion: 1,
            fields: ["title": .text("B")], clocks: ["title": Fixtures.clock(2)])
        let response = try await server.push(PushRequest(mutations: [first, second, update]))
        #expect(applied(response) == [
            .applied(version: 1, serverID: "1"), .applied(version: 1, serverID: "2"), .applied(version: 2, serverID: "1"),
        ])
        #expect(try await server.health().assignsServerIDs)
    }

    @Test func pullPagesThroughChangesWithTombstones() async throws {
        let server = InMemoryTransport()
        let creates = (0..<5).map { _ in Fixtures.createIssue() }
        for create in creates { await server.apply(create) }
        let page1 = try await server.pull(PullRequest(cursor: nil, limit: 2))
        #expect(page1.changes.map(\.recordID) == creates[0..<2].map(\.recordID) && page1.hasMore)
        // A record changed after the device saw it comes again, later in the sequence, as a tombstone.
        let delete = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: creates[0].recordID, baseVersion: 1,
            deletion: Fixtures.clock(9))
        #expect(await server.apply(delete) == .applied(version: 2, serverID: nil))
        let page2 = try await server.pull(PullRequest(cursor: page1.nextCursor, limit: 2))
        let page3 = try await server.pull(PullRequest(cursor: page2.nextCursor, limit: 2))
        #expect(page2.changes.map(\.recordID) == creates[2..<4].map(\.recordID) && page2.hasMore)
        #expect(page3.changes.map(\.recordID) == [creates[4].recordID, creates[0].recordID] && !page3.hasMore)
        #expect(page3.changes.last?.isDeleted == true && page3.changes.last?.deletion == Fixtures.clock(9))
        #expect(page3.changes.map(\.sequence) == [5, 6] && page3.nextCursor == "6")
        await #expect(throws: TransportError.self) { try await server.pull(PullRequest(cursor: "garbage", limit: 2)) }
    }

    @Test func malformedMutationsAreRejectedWithAReasonAndTheRestApplied() async throws {
        let server = InMemoryTransport()
        var unknown = Fixtures.createIssue()
        unknown.fields["colour"] = .text("red")
        unknown.clocks["colour"] = Fixtures.clock(1)
        var clockless = Fixtures.createIssue()
        clockless.clocks["title"] = nil
        let missing = PushMutation(
            idempotencyKey: UUID(), entity: .issue, operation: .update, recordID: UUID(), baseVersion: 1)
        let good = Fixtures.createIssue()
        let outcomes = applied(try await server.push(PushRequest(mutations: [unknown, clockless, missing, good])))
        guard case .rejected(let reason) = outcomes[0] else { Issue.record("\(outcomes)"); return }
        #expect(reason.code == .invalidRequest && reason.message.contains("colour"))
        guard case .rejected(let second) = outcomes[1], case .rejected(let third) = outcomes[2] else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(second.code == .invalidRequest && third.code == .notFound)
        #expect(outcomes[3] == .applied(version: 1, serverID: nil))
    }

    @Test func aBatchOverTheLimitIsRefusedWhole() async throws {
        let server = InMemoryTransport(maximumBatchSize: 2)
        do {
            _ = try await server.push(PushRequest(mutations: (0..<3).map { _ in Fixtures.createIssue() }))
            Issue.record("expected batch_too_large")
        } catch {
            #expect(error.code == .rejected && error.serverCode == .batchTooLarge && error.status == 413)
        }
    }

    @Test func injectedHTTPFailuresAreClassifiedAndAimedAtTheirRoute() async throws {
        let server = InMemoryTransport()
        await server.inject(.serverError(status: 503, retryAfter: .seconds(30)), on: .pull)
        await server.inject(.rateLimited(retryAfter: .seconds(5)))
        await server.inject(.unauthorized)
        let push = PushRequest(mutations: [])
        var errors: [TransportError] = []
        for _ in 0..<2 {
            do { _ = try await server.push(push) } catch { errors.append(error) }
        }
        do { _ = try await server.pull(PullRequest(cursor: nil, limit: 1)) } catch { errors.append(error) }
        #expect(errors.map(\.code) == [.rateLimited, .unauthorized, .serverFailure])
        #expect(errors.map(\.retryAfter) == [.seconds(5), nil, .seconds(30)])
        #expect(errors.map(\.status) == [429, 401, 503])
        #expect(try await server.push(push).results.isEmpty)
        #expect(await server.requests == [.push, .push, .pull, .push])
    }

    @Test func mediaResumesFromTheServersOffset() async throws {
        let server = InMemoryTransport()
        let id = UUID()
        let file = Data((0..<100).map { UInt8($0) })
        func chunk(_ range: Range<Int>) -> MediaChunk {
            MediaChunk(attachmentID: id, offset: Int64(range.lowerBound), totalBytes: 100, sha256: "", data: file[range])
        }
        #expect(try await server.mediaUploadStatus(for: id).receivedBytes == 0)
        _ = try await server.uploadMedia(chunk(0..<40))
        await server.inject(.dropResponse, on: .mediaUpload)
        await #expect(throws: TransportError.self) { try await server.uploadMedia(chunk(40..<80)) }
        do {
            _ = try await server.uploadMedia(chunk(40..<80))
            Issue.record("expected range_mismatch")
        } catch {
            #expect(error.serverCode == .rangeMismatch && error.status == 409)
        }
        let status = try await server.mediaUploadStatus(for: id)
        #expect(status.receivedBytes == 80 && !status.complete)
        let done = try await server.uploadMedia(chunk(80..<100))
        #expect(done.complete && done.receivedBytes == 100 && done.totalBytes == 100)
        #expect(await server.mediaData(for: id) == file)
    }

    @Test func bundlesDownloadToAFileAndTrafficIsCounted() async throws {
        let server = InMemoryTransport()
        await server.setBundle(Data("<bundle/>".utf8), for: Fixtures.projectID)
        let destination = URL(fileURLWithPath: "/tmp/sync-bundle-\(UUID().uuidString).xml")
        defer { try? FileManager.default.removeItem(at: destination) }
        #expect(try await server.downloadBundle(project: Fixtures.projectID, format: .xml, to: destination) == 9)
        #expect(try Data(contentsOf: destination) == Data("<bundle/>".utf8))
        await #expect(throws: TransportError.self) {
            try await server.downloadBundle(project: UUID(), format: .json, to: destination)
        }
        let before = await server.transferred
        _ = try await server.push(PushRequest(mutations: [Fixtures.createIssue()]))
        let run = await server.transferred.since(before)
        #expect(run.requests == 1 && run.bytesSent > 300 && run.bytesReceived > 50)
    }
}
