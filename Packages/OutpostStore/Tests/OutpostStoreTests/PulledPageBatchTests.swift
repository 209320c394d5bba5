@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// A pulled page reads what its records need once for the whole page (`PulledPageReads`); these pin
/// the edges of that batching: what a page of many records stores must be what the same changes store
/// one page each (except where a page deliberately counts its own records as present parents).
@Suite(.fieldService) struct PulledPageBatchTests {
    let server = NodeID(0xFEED)

    func remote(_ model: some Syncable, version: Int64, at milliseconds: Int64, deleted: Bool = false) -> VersionedRecord {
        var record = model.record
        record.sync.version = version
        record.sync.serverID = nil
        record.sync.createdAt = Date(timeIntervalSince1970: 1)
        record.sync.updatedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        if deleted { record.sync.deletedAt = Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        return VersionedRecord(
            record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    /// Every issue row and every field clock row, as text, to compare two stores.
    func snapshot(_ path: String) throws -> [String] {
        try DatabaseQueue(path: path).read { db in
            let issues = try Row.fetchAll(db, sql: "SELECT * FROM issues ORDER BY id").map(\.description)
            let clocks = try Row.fetchAll(db, sql: "SELECT * FROM field_clocks ORDER BY entity, record_id").map(\.description)
            let projects = try Row.fetchAll(db, sql: "SELECT * FROM projects ORDER BY id").map(\.description)
            return projects + issues + clocks
        }
    }

    /// A page's `leftProjects` is kept only for a project this device holds: there is nothing of any other
    /// to hand over. A hostile server's pages of random ids were each stored, 4,000,000 "left project"
    /// lines and 552 MB of database from eight pages (attack 85, F1).
    @Test func onlyAProjectThisDeviceHoldsIsKeptAsLeft() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("left-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try LocalStore.open(at: folder.appendingPathComponent("device.sqlite").path)
        let held = Project(name: "Tower")
        try await store.applyPulledPage(PulledPage(changes: [remote(held, version: 1, at: 1_000)], cursor: "c-1"))
        let strangers = (0..<50).map { _ in UUID() }
        let report = try await store.applyPulledPage(PulledPage(changes: [], cursor: "c-2", leftProjects: strangers + [held.id]))
        #expect(report.leftProjects == [held.id])
        #expect(try store.status().leftProjects == [held.id])
    }

    @Test func aPageHoldingARecordTwiceStoresWhatTwoPagesWould() async throws {
        let project = Project(name: "Tower")
        var issue = Issue(projectID: project.id, title: "Crack", status: .open)
        let first = remote(issue, version: 1, at: 1_000)
        issue.title = "Crack, level 3"
        issue.status = .inProgress
        let second = remote(issue, version: 2, at: 2_000)
        let other = Issue(projectID: project.id, title: "Leak")
        let changes = [remote(project, version: 1, at: 900), first, remote(other, version: 1, at: 1_500), second]

        let batched = try TemporaryDatabase(), single = try TemporaryDatabase()
        let batchedStore = try LocalStore.open(at: batched.path), singleStore = try LocalStore.open(at: single.path)
        let now = Date(timeIntervalSince1970: 10)
        let report = try await batchedStore.applyPulledPage(PulledPage(changes: changes, cursor: "c-4"), now: now)
        #expect(report.applied == 4)
        for (index, change) in changes.enumerated() {
            try await singleStore.applyPulledPage(PulledPage(changes: [change], cursor: "c-\(index + 1)"), now: now)
        }
        #expect(try snapshot(batched.path) == snapshot(single.path))
        let stored = try #require(try batchedStore.fetch(Issue.self, id: issue.id))
        #expect(stored.title == "Crack, level 3")
        #expect(stored.sync.version == 2)
        // The second change saw the first: the title it replaced is kept for a stale copy.
        let issueID = issue.id
        let clocks = try #require(try await batched.queue.read { db in try FieldClocks.read(.issue, issueID, in: db) })
        #expect(clocks.pulled?["title"]?.last?.previous == .text("Crack"))
    }

    @Test func aParentAndItsChildInOnePageAreNotOrphans() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = Project(name: "Annex")
        let early = Issue(projectID: project.id, title: "Before its project")
        let late = Issue(projectID: project.id, title: "After its project")
        let stray = Issue(projectID: UUID(), title: "Project never seen")
        let report = try await store.applyPulledPage(PulledPage(
            changes: [remote(early, version: 1, at: 1_000), remote(project, version: 1, at: 1_001),
                      remote(late, version: 1, at: 1_002), remote(stray, version: 1, at: 1_003)],
            cursor: "c-1"))
        #expect(report.orphaned == 1)
        #expect(try store.fetch(Issue.self, id: early.id)?.isOrphaned == false)
        #expect(try store.fetch(Issue.self, id: late.id)?.isOrphaned == false)
        #expect(try store.fetch(Issue.self, id: stray.id)?.isOrphaned == true)

        // A parent deleted in the page orphans its children already stored, and one that comes after
        // it in the same page is still stored as the server sends it.
        let afterDelete = Issue(projectID: project.id, title: "Raised as the project closed")
        let second = try await store.applyPulledPage(PulledPage(
            changes: [remote(project, version: 2, at: 2_000, deleted: true), remote(afterDelete, version: 1, at: 2_001)],
            cursor: "c-2"))
        #expect(try store.fetch(Issue.self, id: early.id)?.isOrphaned == true)
        #expect(try store.fetch(Issue.self, id: late.id)?.isOrphaned == true)
        #expect(try store.fetch(Issue.self, id: afterDelete.id)?.isOrphaned == true, "its parent arrived deleted")
        #expect(second.orphaned == 3)
    }

    /// Attack 125, F3: a fresh device whose first page held a deleted project and its live issue kept the
    /// issue as a plain one, where a device that held the project, or a pre-synced one, flags it
    /// orphaned. A parent arriving in the same page spares its child only when it arrives live, in
    /// whichever order the page holds them.
    @Test(arguments: [false, true])
    func aChildWhoseParentArrivesDeletedInItsPageIsAnOrphan(parentFirst: Bool) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = Project(name: "Closed annex")
        let issue = Issue(projectID: project.id, title: "Left open")
        let parent = remote(project, version: 2, at: 1_000, deleted: true), child = remote(issue, version: 1, at: 1_001)
        let report = try await store.applyPulledPage(PulledPage(changes: parentFirst ? [parent, child] : [child, parent], cursor: "c-1"))
        #expect(try store.fetch(Issue.self, id: issue.id)?.isOrphaned == true)
        #expect(report.orphaned == 1)
        // A parent whose page holds it deleted and then live again (restored) spares its child.
        let otherFolder = try TemporaryDatabase()
        let other = try LocalStore.open(at: otherFolder.path)
        _ = try await other.applyPulledPage(PulledPage(
            changes: [parent, child, remote(project, version: 3, at: 1_002)], cursor: "c-1"))
        #expect(try other.fetch(Issue.self, id: issue.id)?.isOrphaned == false)
    }

    /// The family of attack 125, F3, as a law: however the server's history is cut into pages and
    /// ordered within them, and whatever the device held before, once it has pulled it all an issue is
    /// flagged orphaned exactly when its project is deleted or was never sent.
    @Test(arguments: 0..<12)
    func orphanFlagsAreTheServerStatesWhateverThePages(seed: Int) async throws {
        var random = SeededGenerator(seed: UInt64(1_000 + seed))
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let projects = (0..<4).map { Project(name: "Site \($0)") }
        let deleted = Set(projects.filter { _ in Bool.random(using: &random) }.map(\.id))
        let neverSent = projects[3].id  // a project this device may not see
        let issues = (0..<12).map { Issue(projectID: projects[Int.random(in: 0..<4, using: &random)].id, title: "Issue \($0)") }
        var time: Int64 = 1_000
        func next() -> Int64 { time += 1; return time }
        // Some devices held the projects before (live), as a device synced earlier did.
        var history: [VersionedRecord] = []
        let heldBefore = Bool.random(using: &random)
        if heldBefore {
            _ = try await store.applyPulledPage(PulledPage(
                changes: projects.filter { $0.id != neverSent }.map { remote($0, version: 1, at: next()) }, cursor: "c-0"))
        }
        history += projects.filter { $0.id != neverSent }.map {
            remote($0, version: 2, at: next(), deleted: deleted.contains($0.id))
        }
        history += issues.map { remote($0, version: 1, at: next()) }
        history.shuffle(using: &random)
        var pages: [[VersionedRecord]] = []
        while !history.isEmpty {
            let size = min(history.count, Int.random(in: 1...8, using: &random))
            pages.append(Array(history.prefix(size)))
            history.removeFirst(size)
        }
        for (index, page) in pages.enumerated() {
            _ = try await store.applyPulledPage(PulledPage(changes: page, cursor: "c-\(index + 1)"))
        }
        for issue in issues {
            let expected = deleted.contains(issue.projectID) || issue.projectID == neverSent
            #expect(
                try store.fetch(Issue.self, id: issue.id)?.isOrphaned == expected,
                "seed \(seed): issue of a project \(expected ? "gone" : "live"), held before: \(heldBefore), pages \(pages.map(\.count))")
        }
    }

    @Test func aRecordWithALocalChangeIsMergedBesideOnesWithout() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = Project(name: "Depot")
        let mine = Issue(projectID: project.id, title: "Door", status: .open)
        let held = Issue(projectID: project.id, title: "Window", status: .open)
        try await store.applyPulledPage(
            PulledPage(changes: [remote(project, version: 1, at: 1_000), remote(mine, version: 1, at: 1_000),
                                 remote(held, version: 1, at: 1_000)], cursor: "c-1"),
            now: Date(timeIntervalSince1970: 1))
        var edited = try #require(try store.fetch(Issue.self, id: mine.id))
        edited.status = .inProgress
        try await store.save(edited, now: Date(timeIntervalSince1970: 2))

        var theirs = mine
        theirs.status = .resolved
        var heldChange = held
        heldChange.title = "Window, east side"
        let fresh = Issue(projectID: project.id, title: "Roof")
        // The record with the local change sits between records without, and comes twice.
        let report = try await store.applyPulledPage(PulledPage(
            changes: [remote(heldChange, version: 2, at: 5_000), remote(theirs, version: 2, at: 5_000),
                      remote(fresh, version: 1, at: 5_000), remote(theirs, version: 2, at: 5_000)],
            cursor: "c-2"), now: Date(timeIntervalSince1970: 5))
        #expect(report.merged == 1, "the first change of the edited record merges; the second finds it settled")
        #expect(report.applied == 2)
        #expect(report.unchanged == 0, "the second copy found the record as the first left it, which the page did change")
        #expect(report.conflictsSurfaced == 1)
        let conflict = try #require(try store.openConflicts().first)
        #expect(conflict.recordID == mine.id)
        #expect(conflict.localValue == .text("inProgress"))
        #expect(try store.fetch(Issue.self, id: mine.id)?.status == .resolved)
        #expect(try store.fetch(Issue.self, id: held.id)?.title == "Window, east side")
        #expect(try store.fetch(Issue.self, id: held.id)?.sync.syncStatus == .synced)
        #expect(try store.fetch(Issue.self, id: fresh.id)?.sync.syncStatus == .synced)
        let clocks = try #require(try await folder.queue.read { db in try FieldClocks.read(.issue, held.id, in: db) })
        #expect(clocks.pulled?["title"]?.last?.previous == .text("Window"), "a held record's replaced value is kept")
    }

    @Test func aQuarantinedRecordIsClearedByAValidVersionInTheSamePage() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = Project(name: "Yard")
        let issue = Issue(projectID: project.id, title: "Fence")
        var broken = remote(issue, version: 1, at: 1_000).record
        broken["status"] = .text("onFire")
        let bad = VersionedRecord(record: broken, stampedAt: HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: server))
        let other = Issue(projectID: project.id, title: "Gate")
        var otherBroken = remote(other, version: 1, at: 1_000).record
        otherBroken["priority"] = .text("whenever")
        let otherBad = VersionedRecord(
            record: otherBroken, stampedAt: HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: server))

        let report = try await store.applyPulledPage(PulledPage(
            changes: [remote(project, version: 1, at: 900), bad, otherBad, remote(issue, version: 2, at: 2_000)],
            cursor: "c-1"))
        #expect(report.quarantined == 2)
        #expect(try store.quarantinedRecords().map(\.recordID) == [other.id])
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.version == 2)

        // A later page's valid version clears the entry left by an earlier page.
        try await store.applyPulledPage(PulledPage(changes: [remote(other, version: 2, at: 3_000)], cursor: "c-2"))
        #expect(try store.quarantinedRecords().isEmpty)
        #expect(try store.fetch(Issue.self, id: other.id)?.title == "Gate")
    }
}

/// Attack 64, finding F3: a hostile server sent, page after page, a record with a 20 MiB title (an honest
/// one refuses a text over 1 MiB on push), and the device stored each whole: its file grew 120 MB every
/// 5 s. A pulled text longer than any write may hold is quarantined, and not held for a later build.
@Suite(.fieldService) struct OversizedPulledValueTests {
    @Test func aPulledTextLongerThanAnyWriteMayHoldIsQuarantinedWithoutItsValue() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = UUID()
        let stamp = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0xBAD))
        var long = Issue(projectID: project, title: String(repeating: "x", count: EntityRecord.maximumTextBytes + 1)).record
        long.sync.version = 1
        var fine = Issue(projectID: project, title: "Loose rail").record
        fine.sync.version = 1
        let report = try await store.applyPulledPage(PulledPage(
            changes: [VersionedRecord(record: long, stampedAt: stamp), VersionedRecord(record: fine, stampedAt: stamp)], cursor: "1"))
        #expect(report.quarantined == 1)
        #expect(try store.record(.issue, id: long.id) == nil)
        #expect(try store.record(.issue, id: fine.id)?["title"] == .text("Loose rail"))
        let entry = try #require(try store.quarantinedRecords().first { $0.recordID == long.id })
        #expect(entry.reason.contains("\(EntityRecord.maximumTextBytes + 1) bytes"), "\(entry.reason)")
        let kept = try await DatabaseQueue(path: folder.path).read { db in
            try Int.fetchOne(db, sql: "SELECT max(length(value)) FROM sync_state WHERE key LIKE 'quarantined%'") ?? 0
        }
        #expect(kept < 4_096, "the quarantine keeps why, not the value: \(kept) bytes")
    }

    /// Attack 71, finding F4: pulled versions were not range-checked. Int64.max was stored, after which
    /// every real version of the record was ignored as older; a version of 0 or below was dropped
    /// without a trace. A version outside 1…2^53−1 (no server counts further, and JSON's integers are
    /// exact only up to there) is quarantined, live or tombstone, and a real version applies after it.
    @Test(arguments: [Int64.max, Int64(1) << 53, 0, -1, Int64.min])
    func aPulledVersionOutsideItsRangeIsQuarantined(_ version: Int64) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = UUID()
        let stamp = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0xBAD))
        var bad = Issue(projectID: project, title: "Loose rail").record
        bad.sync.version = version
        var tombstone = Issue(projectID: project, title: "Gone").record
        tombstone.fields = [:]
        tombstone.sync.version = version
        tombstone.sync.deletedAt = Date(timeIntervalSince1970: 1_795_000_000)
        let report = try await store.applyPulledPage(PulledPage(
            changes: [
                VersionedRecord(record: bad, stampedAt: stamp),
                try VersionedRecord(record: tombstone, clocks: [:], deletion: stamp),
            ],
            cursor: "1"))
        #expect(report.quarantined == 2)
        #expect(try store.record(.issue, id: bad.id) == nil)
        #expect(Set(try store.quarantinedRecords().map(\.recordID)) == [bad.id, tombstone.id])
        #expect(try store.quarantinedRecords().allSatisfy { $0.reason.contains("version") })
        // The record's real version, pulled later, is stored and clears its entry.
        bad.sync.version = 3
        bad["title"] = .text("Loose rail, fixed")
        let later = HybridTimestamp(physicalMilliseconds: 1_795_000_000_001, counter: 0, node: NodeID(0xBAD))
        try await store.applyPulledPage(PulledPage(changes: [VersionedRecord(record: bad, stampedAt: later)], cursor: "2"))
        #expect(try store.record(.issue, id: bad.id)?.sync.version == 3)
        #expect(try store.quarantinedRecords().map(\.recordID) == [tombstone.id])
    }
}


/// Attack 65 F3: a server answering page after page of valid records grew the device's file by 40 MB/s
/// for as long as the sync ran. Pulled pages stop while the volume holds less free space than the
/// store keeps for the user's own writes; the page is not applied and the cursor stays.
@Suite(.fieldService) struct PulledPagesKeepRoomTests {
    @Test func aPageIsRefusedWhileTheVolumeHasLessFreeSpaceThanTheStoreKeeps() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path, app: .fieldService, keepingFree: Int64.max / 2)
        var issue = Issue(projectID: UUID(), title: "Loose rail").record
        issue.sync.version = 1
        let stamp = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0xBAD))
        do {
            try await store.applyPulledPage(PulledPage(changes: [VersionedRecord(record: issue, stampedAt: stamp)], cursor: "1"))
            Testing.Issue.record("a page was applied with no room kept")
        } catch {
            #expect(error.code == .storageFull)
            #expect(error.description.contains("free"), "\(error)")
        }
        #expect(try store.record(.issue, id: issue.id) == nil)
        #expect(try store.pullCursor() == nil)
        // The user's own writes still go in: the room is kept for them.
        _ = try await store.save(OutpostModels.Issue(projectID: UUID(), title: "Bolt sheared"))
        // With room, the same page applies.
        let roomy = try LocalStore.open(at: folder.path, app: .fieldService, keepingFree: 0)
        try await roomy.applyPulledPage(PulledPage(changes: [VersionedRecord(record: issue, stampedAt: stamp)], cursor: "1"))
        #expect(try roomy.record(.issue, id: issue.id) != nil)
    }
}
