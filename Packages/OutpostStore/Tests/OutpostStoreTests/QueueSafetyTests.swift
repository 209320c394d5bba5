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

/// Paths an outside review found where the queue could stop or the store refuse a write: folding that
/// built a cycle of waits, a failure that undid a merge's verdict, a write during another connection's
/// transaction, and a clock that once ran ahead.
@Suite(.fieldService) struct QueueSafetyTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    /// Claims and acknowledges until nothing is claimed; returns the records in the order they went.
    func drain(_ store: LocalStore) throws -> [UUID] {
        var sent: [UUID] = []
        for version in 1...20 {
            let batch = try store.claimMutations(limit: 10, now: now)
            if batch.isEmpty { break }
            for mutation in batch {
                try store.acknowledge(mutation, serverVersion: Int64(version), serverID: nil, now: now)
                sent.append(mutation.recordID)
            }
        }
        return sent
    }

    @Test func aClockInEditedIntoAClockOutNamingItsOwnClockOutDoesNotDeadlockTheQueue() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let project = UUID(), member = UUID()
        // Clock-in B, then clock-out A naming B, then B edited into a clock-out naming A: folded into B's
        // unsent create, B would wait on A's create, which waits on B.
        var b = try await store.save(
            TimeEntry(projectID: project, memberID: member, kind: .clockIn, recordedAt: now), now: now)
        let a = try await store.save(
            TimeEntry(projectID: project, memberID: member, kind: .clockOut, recordedAt: now, clockInID: b.id), now: now)
        b.kind = .clockOut
        b.clockInID = a.id
        b = try await store.save(b, now: now.addingTimeInterval(1))

        #expect(try store.blockedMutations().isEmpty)
        let sent = try drain(store)
        #expect(sent == [b.id, a.id, b.id], "B's create, A's create, then B's edit on its own")
        #expect(try store.status().pendingChanges == 0)
    }

    @Test func aCycleOfWaitsInTheQueueIsReportedAsBlocked() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let first = try await store.save(Issue(projectID: UUID(), title: "One"), now: now)
        let second = try await store.save(Issue(projectID: UUID(), title: "Two"), now: now)
        let third = try await store.save(Issue(projectID: UUID(), title: "Waits on two"), now: now)
        // A queue written by an older build: each create waits on the other's.
        let queue = try DatabaseQueue(path: folder.path)
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE mutation_queue SET depends_on = ? WHERE record_id = ?",
                arguments: ["[\"\(second.id.storageText)\"]", first.id.storageText])
            try db.execute(
                sql: "UPDATE mutation_queue SET depends_on = ? WHERE record_id = ?",
                arguments: ["[\"\(first.id.storageText)\"]", second.id.storageText])
            try db.execute(
                sql: "UPDATE mutation_queue SET depends_on = ? WHERE record_id = ?",
                arguments: ["[\"\(second.id.storageText)\"]", third.id.storageText])
        }
        #expect(try store.claimMutations(limit: 10, now: now).isEmpty)
        let blocked = try store.blockedMutations()
        let cycle = try store.mutations().filter { [first.id, second.id].contains($0.recordID) }.map(\.sequence).sorted()
        #expect(Set(blocked.map(\.mutation.recordID)) == [first.id, second.id, third.id])
        #expect(blocked.allSatisfy { $0.blockedBy == cycle })
    }

    @Test func failingAMutationAMergeAlreadySettledLeavesItDone() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let claimed = try #require(try store.claimMutations(limit: 1, now: now).first)
        try store.acknowledge(claimed, serverVersion: 1, serverID: nil, now: now)
        let blocked = try store.fail(claimed, reason: "a late answer")
        #expect(blocked.isEmpty)
        #expect(try store.mutations(status: .failed).isEmpty)
        #expect(try store.fetch(Issue.self, id: issue.id)?.sync.syncStatus == .synced)
    }

    @Test func aSaveWhileAnotherConnectionWritesWaitsForItInsteadOfFailing() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        // Another connection (an import, another process's sync) holds the write lock for a while.
        let other = try DatabaseQueue(path: folder.path)
        let locked = DispatchSemaphore(value: 0)
        let holder = Thread {
            try? other.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                locked.signal()
                Thread.sleep(forTimeInterval: 1.0)
                try db.execute(sql: "COMMIT")
            }
        }
        holder.start()
        locked.wait()
        let saved = try await store.save(Issue(projectID: UUID(), title: "Saved while locked"), now: now)
        #expect(try store.fetch(Issue.self, id: saved.id)?.title == "Saved while locked")
        #expect(try store.status().pendingChanges == 1)
    }

    @Test func anAttachThatCannotCommitForAnotherProcesssWriteLeavesTheCallersFileAndNothingElse() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path, busyTimeout: .milliseconds(300))
        let issue = try await store.save(Issue(projectID: UUID(), title: "Cracked sill"), now: now)
        let source = folder.directory.appendingPathComponent("camera-temp.jpg")
        try Data(repeating: 9, count: 4_000).write(to: source)
        // Another process (a long import) holds the write lock for longer than this store waits.
        let other = try DatabaseQueue(path: folder.path)
        let locked = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holder = Thread {
            try? other.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                locked.signal()
                release.wait()
                try db.execute(sql: "COMMIT")
            }
        }
        holder.start()
        locked.wait()
        defer { release.signal() }
        let attachment = MediaAttachment(
            issueID: issue.id, kind: .photo, fileName: "sill.jpg", contentType: "image/jpeg", byteSize: 0, sha256: "", capturedAt: now)
        do {
            try await store.attach(attachment, originalAt: source, now: now)
            Issue.record("the attach committed while another connection held the write lock")
        } catch {
            #expect(error.code == .databaseBusy, "\(error)")
        }
        #expect(try Data(contentsOf: source) == Data(repeating: 9, count: 4_000), "the caller's file is untouched")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: store.mediaFolder.path)) ?? []
        #expect(left.isEmpty, "no copy left behind: \(left)")
        release.signal()
        // Once the other write is done, the same attach goes through.
        try await Task.sleep(for: .milliseconds(200))
        let attached = try await store.attach(attachment, originalAt: source, now: now)
        #expect(FileManager.default.fileExists(atPath: store.mediaFolder.appendingPathComponent(attached.id.storageText).path))
    }

    @Test func aSaveDuringAnotherStoresPullWaitsForIt() async throws {
        let folder = try TemporaryDatabase()
        let app = try LocalStore.open(at: folder.path)
        let sync = try LocalStore.open(at: folder.path)
        let page = (0..<3_000).map { index -> VersionedRecord in
            var record = Issue(projectID: UUID(), title: "Pulled \(index)").record
            record.sync.version = 1
            return VersionedRecord(record: record, stampedAt: HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: NodeID(9)))
        }
        async let pulled = sync.applyPulledPage(PulledPage(changes: page, cursor: "1"), now: now)
        var saved = 0
        for index in 0..<20 {
            try await app.save(Issue(projectID: UUID(), title: "Saved \(index)"), now: now)
            saved += 1
        }
        #expect(try await pulled.applied == 3_000)
        let pending = try app.status().pendingChanges
        #expect(saved == 20 && pending == 20)
    }

    @Test func aDeviceWhoseClockRanADayAheadStampsItsNextWritesByItsCorrectedClock() async throws {
        let folder = try TemporaryDatabase()
        let ahead = now.addingTimeInterval(86_400)
        do {
            let store = try LocalStore.open(at: folder.path)
            _ = try await store.save(Issue(projectID: UUID(), title: "Written a day ahead"), now: ahead)
        }
        // The date is corrected and the app starts again: the saved clock still says a day ahead.
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Written on time"), now: now)
        let mutation = try #require(try store.mutations().first { $0.recordID == issue.id })
        let stamp = try #require(mutation.clocks.values.first)
        #expect(abs(stamp.date.timeIntervalSince(now)) < 5, "stamped by the wall clock, not a day ahead")
        // And after another restart, never before what was stamped since.
        let reopened = try LocalStore.open(at: folder.path)
        let later = try await reopened.save(Issue(projectID: UUID(), title: "After a restart"), now: now)
        let laterStamp = try #require(try reopened.mutations().first { $0.recordID == later.id }?.clocks.values.first)
        #expect(laterStamp > stamp)
    }

    @Test func aRecordStampedWhileTheClockRanAheadIsStampedAgainWhenTheServerRefusesIt() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let ahead = now.addingTimeInterval(86_400)
        var issue = try await store.save(Issue(projectID: UUID(), title: "Written a day ahead"), now: ahead)
        // An edit after the date was corrected still follows the write it edits, bad stamp and all.
        issue.title = "Edited on time"
        issue = try await store.save(issue, now: now)
        let claimed = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(claimed.clocks.values.contains { $0.date > now.addingTimeInterval(3_600) }, "the folded create keeps the bad stamp")
        #expect(try await store.restampRefusedClocks(of: claimed, reason: "clock_ahead", now: now))
        let again = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(again.sequence == claimed.sequence)
        #expect(again.idempotencyKey != claimed.idempotencyKey)
        #expect(again.clocks.values.allSatisfy { $0.date <= now.addingTimeInterval(5) })
        #expect(try store.status().clockWarning == nil)
    }

    @Test func aRefusedReattachKeepsThePreviousOriginalAndAFailedUploadCanBeRetried() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Cracked sill"), now: now)
        let first = folder.directory.appendingPathComponent("first.jpg")
        try Data(repeating: 1, count: 1_000).write(to: first)
        let photo = try await store.attach(
            MediaAttachment(issueID: issue.id, kind: .photo, fileName: "first.jpg", contentType: "image/jpeg",
                            byteSize: 0, sha256: "", capturedAt: now),
            originalAt: first, now: now)
        let second = folder.directory.appendingPathComponent("second.jpg")
        try Data(repeating: 2, count: 2_000).write(to: second)
        var invalid = photo
        invalid.fileName = ""
        await #expect(throws: StoreError.self) { try await store.attach(invalid, originalAt: second, now: now) }
        let kept = try Data(contentsOf: store.mediaFolder.appendingPathComponent(photo.id.storageText))
        #expect(kept == Data(repeating: 1, count: 1_000), "the photo the user had is still there")

        try store.recordMediaFailure(of: photo.id, reason: "422 checksum_mismatch", permanently: true)
        #expect(try store.status().pendingMediaUploads == 0)
        #expect(try store.retryFailedMediaUploads() == 1)
        #expect(try store.status().pendingMediaUploads == 1)
    }

    /// Attack 61, finding 1: a server gave a record clocks at (or next to) the last instant the encoding
    /// holds. An edit of it had to be stamped after them: at the very end the process trapped on every
    /// save and sync; next to it the edit was stamped as far ahead, refused `clock_ahead`, stamped again
    /// no earlier and sent again, round and round. Held with a warning instead (round 61's fix), it
    /// waited for good even once the server was honest again (attack 62, finding M3). Now the edit
    /// saves, and its refusal stamps it again by this device's time, past the clocks no server that
    /// refuses clocks ahead of its time holds: the server judges it by the clocks it has.
    @Test(arguments: [UInt16.max, 0])
    func aRecordAServerStampedAtTheEndOfTimeCanStillBeEdited(counter: UInt16) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Loose rail")
        var record = issue.record
        record.sync.version = 1
        let end = HybridTimestamp(
            physicalMilliseconds: HybridTimestamp.maximumPhysicalMilliseconds, counter: counter, node: NodeID(0xFEED))
        _ = try await store.applyPulledPage(
            PulledPage(changes: [VersionedRecord(record: record, stampedAt: end)], cursor: "1"), now: now)
        var edited = try #require(try store.fetch(Issue.self, id: issue.id))
        edited.details = "Bolt sheared"
        _ = try await store.save(edited, now: now)
        let claimed = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(claimed.clocks.values.allSatisfy { $0.physicalMilliseconds == HybridTimestamp.maximumPhysicalMilliseconds })
        #expect(try await store.restampRefusedClocks(of: claimed, reason: "clock_ahead", now: now))
        #expect(try store.status().clockWarning == nil)
        let again = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(again.idempotencyKey != claimed.idempotencyKey)
        #expect(again.fields["details"] == .text("Bolt sheared"))
        #expect(!again.clocks.isEmpty && again.clocks.values.allSatisfy { $0.date <= now.addingTimeInterval(5) }, "\(again.clocks)")
        #expect(try store.fetch(Issue.self, id: issue.id)?.details == "Bolt sheared")
    }

    /// A new store holding one issue pulled at version 1, every field stamped `stamp`.
    func storeHoldingAnIssue(stampedAt stamp: HybridTimestamp) async throws -> (TemporaryDatabase, LocalStore, OutpostModels.Issue) {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = Issue(projectID: UUID(), title: "Loose rail")
        var record = issue.record
        record.sync.version = 1
        _ = try await store.applyPulledPage(PulledPage(changes: [VersionedRecord(record: record, stampedAt: stamp)], cursor: "1"), now: now)
        return (folder, store, issue)
    }

    /// The family of attack 63, finding F1 (and attack 64's F1, edits folded into one change): a write
    /// stamped after a clock beyond the allowance (one a hostile answer gave its record), made with this
    /// device's date right, and refused `clock_ahead` by the honest server, is stamped again field by
    /// field by what it saw: the time the field was last written, after the newest clock within the
    /// allowance then, and after nothing pulled since. Seeded cases mix edits of two fields with
    /// teammates' edits pulled between and after them, at skews within the allowance.
    @Test(arguments: 0..<3 as Range<UInt64>)
    func anEditThatFollowedAClockAheadIsStampedAgainByWhatItSaw(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        for _ in 0..<10 {
            let folder = try TemporaryDatabase()
            let store = try LocalStore.open(at: folder.path)
            let issue = Issue(projectID: UUID(), title: "Loose rail")
            var onServer = issue.record
            onServer.sync.version = 1
            let hostile = Bool.random(using: &random)
                ? HybridTimestamp(
                    physicalMilliseconds: HybridTimestamp.maximumPhysicalMilliseconds,
                    counter: Bool.random(using: &random) ? .max : 0, node: NodeID(0xBAD))
                : HybridTimestamp(
                    physicalMilliseconds: now.storageMilliseconds + Int64.random(in: 3_600_000...400_000_000_000, using: &random),
                    counter: 0, node: NodeID(0xBAD))
            _ = try await store.applyPulledPage(
                PulledPage(changes: [VersionedRecord(record: onServer, stampedAt: hostile)], cursor: "1"), now: now)
            var time = now.storageMilliseconds
            // Per field: when it was last written, and the newest clock within the allowance then.
            var written: [String: (at: Int64, seen: HybridTimestamp?)] = [:]
            var pulled: [HybridTimestamp] = []
            let steps = Int.random(in: 1...4, using: &random)
            for step in 0..<steps {
                time += Int64.random(in: 1...3_000, using: &random)
                let field = Bool.random(using: &random) ? "details" : "title"
                // The first step is an edit: a newer version pulled before any holds the server's clocks
                // instead of the hostile ones, and nothing follows a clock ahead.
                if step == 0 || Int.random(in: 0..<5, using: &random) < 3 {
                    var copy = try #require(try store.record(.issue, id: issue.id))
                    copy[field] = .text("crew \(step)")
                    _ = try await store.save(copy, now: Date(storageMilliseconds: time))
                    written[field] = (time, pulled.max())
                } else {
                    let teammate = HybridTimestamp(
                        physicalMilliseconds: time + Int64.random(in: -500...500, using: &random), counter: 0, node: NodeID(0x0FF1CE))
                    onServer[field] = .text("office \(step)")
                    onServer.sync.version += 1
                    _ = try await store.applyPulledPage(
                        PulledPage(changes: [VersionedRecord(record: onServer, stampedAt: teammate)], cursor: "\(step + 2)"),
                        now: Date(storageMilliseconds: time))
                    pulled.append(teammate)
                }
            }
            let refusedAt = Date(storageMilliseconds: time + Int64.random(in: 0...10_000, using: &random))
            let unsent = try store.unsentChanges()
            let claimed = try #require(try store.claimMutations(limit: 1, now: refusedAt).first, "unsent: \(unsent)")
            let own = try #require(claimed.clocks.values.first).node
            #expect(claimed.clocks.values.allSatisfy { $0 >= hostile }, "the edit followed the hostile clock")
            #expect(try await store.restampRefusedClocks(of: claimed, reason: "clock_ahead", now: refusedAt))
            let again = try #require(try store.claimMutations(limit: 1, now: refusedAt).first)
            let expected = written.mapValues { write in
                let made = HybridTimestamp(physicalMilliseconds: write.at, counter: 0, node: own)
                return max(made, write.seen?.successor(on: own) ?? made)
            }
            #expect(again.clocks == expected, "stamped again by what each field's last write saw; teammates' clocks pulled: \(pulled)")
            #expect(try store.status().clockWarning == nil)
        }
    }

    /// Attack 64, finding F1 (repro B): a change folded from an edit stamped by the device's own time and
    /// a later one that followed a hostile clock. Stamped again, the earlier field keeps its own time (a
    /// teammate's edit of it made meanwhile still wins) and the later one takes the later edit's time,
    /// after what it saw.
    @Test func aFoldedChangeIsStampedAgainFieldByField() async throws {
        let server = HybridTimestamp(physicalMilliseconds: now.storageMilliseconds - 60_000, counter: 0, node: NodeID(0x5E))
        let (folder, store, issue) = try await storeHoldingAnIssue(stampedAt: server)
        defer { withExtendedLifetime(folder) {} }
        var onServer = issue.record
        onServer.sync.version = 1
        var copy = try #require(try store.record(.issue, id: issue.id))
        copy["title"] = .text("Loose rail, north gate")
        _ = try await store.save(copy, now: now)
        let honest = try #require(try store.unsentChanges().first?.clocks["title"])
        // One answer stamps only the details at the end of time; the title keeps its clock.
        onServer.sync.version = 2
        let end = HybridTimestamp(physicalMilliseconds: HybridTimestamp.maximumPhysicalMilliseconds, counter: 0, node: NodeID(0xBAD))
        let clocks = onServer.fields.mapValues { _ in server }.merging(["details": end]) { _, hostile in hostile }
        _ = try await store.applyPulledPage(
            PulledPage(changes: [try VersionedRecord(record: onServer, clocks: clocks)], cursor: "2"), now: now.addingTimeInterval(1))
        copy = try #require(try store.record(.issue, id: issue.id))
        #expect(copy["title"] == .text("Loose rail, north gate"))
        copy["details"] = .text("Bolt sheared")
        let editedAt = now.addingTimeInterval(2)
        _ = try await store.save(copy, now: editedAt)
        let claimed = try #require(try store.claimMutations(limit: 1, now: editedAt).first)
        #expect(Set(claimed.fields.keys) == ["title", "details"] && claimed.clocks["details"].map { $0 >= end } == true)
        #expect(try await store.restampRefusedClocks(of: claimed, reason: "clock_ahead", now: editedAt.addingTimeInterval(30)))
        let again = try #require(try store.claimMutations(limit: 1, now: editedAt.addingTimeInterval(30)).first)
        let made = HybridTimestamp(physicalMilliseconds: editedAt.storageMilliseconds, counter: 0, node: honest.node)
        #expect(again.clocks == ["title": honest, "details": max(made, honest.successor(on: honest.node))])
    }

    /// Attack 64, finding F5: a `followedAhead` floor edited by hand to the end of time kept the change
    /// refused and waiting for good. A floor that would stamp the field beyond the allowance is not one
    /// this device wrote: the field is stamped afresh, as any refused change is.
    @Test func aFloorEditedToTheEndOfTimeDoesNotParkTheChange() async throws {
        let end = HybridTimestamp(physicalMilliseconds: HybridTimestamp.maximumPhysicalMilliseconds, counter: 0, node: NodeID(0xBAD))
        let (folder, store, issue) = try await storeHoldingAnIssue(stampedAt: end)
        var edited = try #require(try store.fetch(Issue.self, id: issue.id))
        edited.details = "Bolt sheared"
        _ = try await store.save(edited, now: now)
        try await DatabaseQueue(path: folder.path).write { db in
            try db.execute(sql: """
                UPDATE mutation_queue SET payload = json_set(payload, '$.followedAhead.details.floor', 'ffffffffffff-ffff-ffffffffffffffff')
                """)
            #expect(db.changesCount == 1)
        }
        let claimed = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(try await store.restampRefusedClocks(of: claimed, reason: "clock_ahead", now: now))
        let again = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(again.clocks["details"].map { $0.date <= now.addingTimeInterval(300) } == true, "\(again.clocks)")
        #expect(try store.status().clockWarning == nil)
    }

    /// Attack 62, findings M1 and M2: a sync run while the device's date was a day ahead claimed a change
    /// with a lease, and scheduled its retry, by that date. Once the date was right the change waited a
    /// day (for good, for a date in 2100): the retry was not due and the live process's claim not
    /// stale, and nothing said so. A wait or a lease further ahead than any rule sets is one reckoned by
    /// a wrong clock: the next run's start puts the change back in line, due.
    @Test(arguments: [false, true])
    func aWaitOrClaimReckonedByADateAheadDoesNotParkTheChange(retryScheduled: Bool) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Loose rail"), now: now)
        let ahead = now.addingTimeInterval(86_400)
        let claimed = try #require(try store.claimMutations(limit: 1, now: ahead).first)
        if retryScheduled {
            try store.scheduleRetry(claimed, reason: "503 unavailable", retryAt: ahead.addingTimeInterval(1))
        }
        // The date is right again; this very process, still alive, holds the claim if one was left.
        #expect(try store.recoverInterruptedRun(now: now) == (retryScheduled ? 0 : 1), "only a claim is recovered")
        let again = try store.claimMutations(limit: 1, now: now)
        #expect(again.map(\.recordID) == [issue.id])
    }

    @Test func aDeviceWhoseClockStillRunsAheadWaitsAndSaysSo() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let ahead = now.addingTimeInterval(86_400)
        _ = try await store.save(Issue(projectID: UUID(), title: "Written a day ahead"), now: ahead)
        let claimed = try #require(try store.claimMutations(limit: 1, now: ahead).first)
        #expect(try await store.restampRefusedClocks(of: claimed, reason: "clock_ahead", now: ahead) == false)
        #expect(try store.mutations(status: .failed).isEmpty)
        #expect(try store.status().clockWarning != nil)
        // Once the date is right, it goes at once: nothing was scheduled by the wrong clock.
        let again = try #require(try store.claimMutations(limit: 1, now: now).first)
        #expect(again.idempotencyKey != claimed.idempotencyKey)
        #expect(again.attempts == claimed.attempts)
    }
}
