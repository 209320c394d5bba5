@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// A complete run that leaves a quarter of the file free (a drained queue) packs the file, keeping
/// every record, key and audit entry; a file with little free, or a volume without room, is left as
/// it is (issue 41: 588 KB per 1,000 synced issues with those pages, 510 KB packed).
@Suite(.fieldService) struct CompactionTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)
    let project = UUID()

    struct Pages: Equatable {
        let total: Int
        let free: Int
    }

    func pages(_ store: LocalStore) throws -> Pages {
        try store.read { db in
            Pages(
                total: try Int.fetchOne(db, sql: "PRAGMA page_count") ?? -1,
                free: try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? -1)
        }
    }

    /// `count` issues saved, sent and acknowledged: the queue drained as a sync drains it.
    func syncedIssues(_ count: Int, in store: LocalStore) async throws -> [OutpostModels.Issue] {
        var issues: [OutpostModels.Issue] = []
        for index in 0..<count {
            issues.append(try await store.save(
                OutpostModels.Issue(projectID: project, title: "Cracked tile #\(index)", details: "Hairline crack near the sink, 30 cm"),
                now: now))
        }
        for mutation in try store.claimMutations(limit: count, now: now) {
            try store.acknowledge(mutation, serverVersion: 1, serverID: nil, now: now)
        }
        #expect(try store.mutations().isEmpty)
        return issues
    }

    @Test func aRunThatDrainedALargeQueuePacksTheFileAndKeepsEverything() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path, keepingFree: 0)
        let issues = try await syncedIssues(3_000, in: store)
        let drained = try pages(store)
        #expect(drained.free >= LocalStore.compactionMinimumFreePages && drained.free * 4 >= drained.total, "\(drained)")
        let keys = try store.finishedMutationKeys()
        let audit = try store.verifyAudit()

        try store.finishRun(complete: true, at: now)

        let packed = try pages(store)
        #expect(packed.free == 0, "\(packed)")
        #expect(packed.total <= drained.total - drained.free, "packed \(packed), drained \(drained)")
        let held = try store.fetchAll(OutpostModels.Issue.self, where: "projectID", equals: .uuid(project))
        #expect(Set(held.map(\.id)) == Set(issues.map(\.id)))
        #expect(held.allSatisfy { $0.sync.syncStatus == .synced && $0.sync.version == 1 })
        #expect(try store.finishedMutationKeys() == keys)
        let after = try store.verifyAudit()
        #expect(after.isIntact && after.entriesChecked == audit.entriesChecked && audit.entriesChecked == 3_000)
        // Packed, the store writes on as before.
        var edited = try #require(held.first)
        edited.title = "Cracked tile, replaced"
        try await store.save(edited, now: now)
        #expect(try store.mutations().count == 1)
        #expect(try store.verifyAudit().isIntact)
    }

    @Test func aFileWithLittleFreeOrAnIncompleteRunIsLeftAsItIs() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path, keepingFree: 0)
        _ = try await syncedIssues(3_000, in: store)
        let drained = try pages(store)

        // A run cut short: nothing packed, whatever is free.
        try store.finishRun(complete: false, at: now)
        #expect(try pages(store) == drained)

        // Few free pages: nothing packed.
        try store.finishRun(complete: true, at: now)
        let packed = try pages(store)
        _ = try await syncedIssues(20, in: store)
        let few = try pages(store)
        #expect(few.free > 0 && few.free < LocalStore.compactionMinimumFreePages, "\(few)")
        #expect(!store.compactIfWorthwhile())
        #expect(try pages(store) == few && few.total >= packed.total)
    }

    @Test func aVolumeWithoutRoomForTheCopyIsNotPacked() async throws {
        let folder = try TemporaryDatabase()
        let roomy = try LocalStore.open(at: folder.path, keepingFree: 0)
        _ = try await syncedIssues(3_000, in: roomy)
        let drained = try pages(roomy)
        // More room kept free than any volume has: SQLite's copy would take the room kept for the user.
        let short = try LocalStore.open(at: folder.path, keepingFree: Int64.max / 4)
        #expect(!short.compactIfWorthwhile())
        try short.finishRun(complete: true, at: now)
        #expect(try pages(short) == drained)
        #expect(try short.fetchAll(OutpostModels.Issue.self, where: "projectID", equals: .uuid(project)).count == 3_000)
    }
}
