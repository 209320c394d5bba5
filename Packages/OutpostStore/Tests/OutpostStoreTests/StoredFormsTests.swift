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

/// The queue payload and the field clocks are written in compact forms (one clock for all fields, clocks
/// grouped); rows written by earlier versions, with a clock per field, must read back the same.
@Suite(.fieldService) struct StoredFormsTests {
    let early = try! HybridTimestamp(encoded: "0194f3a2b1c0-0000-00000000000000a1")
    let late = try! HybridTimestamp(encoded: "0194f3a2b1c1-0002-00000000000000a1")

    @Test func aPayloadWithOneClockForAllFieldsStoresItOnce() throws {
        let payload = MutationQueue.Payload(
            fields: ["title": .text("Leak"), "status": .text("open")], clocks: ["title": early, "status": early], deletion: nil)
        let text = try payload.encoded()
        #expect(text == #"{"clock":"0194f3a2b1c0-0000-00000000000000a1","fields":{"status":{"text":"open"},"title":{"text":"Leak"}}}"#)
        let decoded = try MutationQueue.Payload.read(text, auditFields: nil, sequence: 1)
        #expect(decoded.fields == payload.fields && decoded.clocks == payload.clocks && decoded.deletion == nil)
    }

    @Test func aPayloadWithClocksPerFieldReadsAsBefore() throws {
        // What earlier versions wrote, and what a folded edit with two clocks still writes.
        let payload = MutationQueue.Payload(
            fields: ["title": .text("Leak"), "status": .text("open")], clocks: ["title": late, "status": early], deletion: late)
        let text = try payload.encoded()
        #expect(text.hasPrefix(#"{"clocks":{"#))
        let old = #"{"clocks":{"status":"0194f3a2b1c0-0000-00000000000000a1","title":"0194f3a2b1c1-0002-00000000000000a1"},"deletion":"0194f3a2b1c1-0002-00000000000000a1","fields":{"status":{"text":"open"},"title":{"text":"Leak"}}}"#
        #expect(text == old)
        let decoded = try MutationQueue.Payload.read(old, auditFields: nil, sequence: 1)
        #expect(decoded.fields == payload.fields && decoded.clocks == payload.clocks && decoded.deletion == late)
    }

    @Test func fieldClocksAreGroupedAndOldRowsReadTheSame() throws {
        let stored = FieldClocks.Stored(
            fields: ["title": late, "status": early, "details": early], deletion: nil, server: ["title": early])
        let text = try stored.encoded(for: .issue)
        #expect(text == #"{"byClock":{"0194f3a2b1c0-0000-00000000000000a1":["details","status"],"0194f3a2b1c1-0002-00000000000000a1":["title"]},"serverByClock":{"0194f3a2b1c0-0000-00000000000000a1":["title"]}}"#)
        let decoded = try FieldClocks.Stored.read(text, entity: .issue)
        #expect(decoded.fields == stored.fields && decoded.server == stored.server && decoded.deletion == nil)

        // After a plain pull the server's clocks are the local ones: stored as a flag, read back whole.
        let pulled = FieldClocks.Stored(fields: stored.fields, deletion: late, server: stored.fields)
        let pulledText = try pulled.encoded(for: .issue)
        #expect(pulledText.hasSuffix(#"]},"serverAsFields":true}"#))
        let pulledBack = try FieldClocks.Stored.read(pulledText, entity: .issue)
        #expect(pulledBack.fields == stored.fields && pulledBack.server == stored.fields && pulledBack.deletion == late)
        let none = try FieldClocks.Stored.read(
            try FieldClocks.Stored(fields: [:], deletion: nil, server: nil).encoded(for: .issue), entity: .issue)
        #expect(none.fields.isEmpty && none.server == nil)

        let old = #"{"fields":{"details":"0194f3a2b1c0-0000-00000000000000a1","status":"0194f3a2b1c0-0000-00000000000000a1","title":"0194f3a2b1c1-0002-00000000000000a1"},"server":{"title":"0194f3a2b1c0-0000-00000000000000a1"}}"#
        let fromOld = try FieldClocks.Stored.read(old, entity: .issue)
        #expect(fromOld.fields == stored.fields && fromOld.server == stored.server)
    }

    /// One clock on every catalog field (a create, a record's first pull) is stored without the names;
    /// one field short or one clock different, and the names are written out as before.
    @Test func aClockOnEveryCatalogFieldIsStoredOnce() throws {
        let names = EntityType.issue.description.fields.map(\.name)
        let every = Dictionary(uniqueKeysWithValues: names.map { ($0, early) })
        let stored = FieldClocks.Stored(fields: every, deletion: late, server: every)
        let text = try stored.encoded(for: .issue)
        #expect(text == #"{"deletion":"0194f3a2b1c1-0002-00000000000000a1","allFieldsAt":"0194f3a2b1c0-0000-00000000000000a1","serverAsFields":true}"#)
        let back = try FieldClocks.Stored.read(text, entity: .issue)
        #expect(back.fields == every && back.server == every && back.deletion == late)

        var mixed = every
        mixed["title"] = late
        let oneShort = every.filter { $0.key != "title" }
        for fields in [mixed, oneShort] {
            let written = try FieldClocks.Stored(fields: fields, deletion: nil, server: nil).encoded(for: .issue)
            #expect(written.hasPrefix(#"{"byClock":"#), "\(written)")
            #expect(try FieldClocks.Stored.read(written, entity: .issue).fields == fields)
        }
        // The same clocks on a daily log are not every field of an issue.
        let asDailyLog = try FieldClocks.Stored(fields: every, deletion: nil, server: nil).encoded(for: .dailyLog)
        #expect(asDailyLog.hasPrefix(#"{"byClock":"#))
    }
}

/// A write's queued mutation keeps its fields in its audit entry instead of a second copy (v12 on).
@Suite(.fieldService) struct QueuedFieldsInAuditTests {
    let project = UUID()

    @Test func aWritesMutationReadsItsFieldsFromItsAuditEntry() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: project, title: "Leak", details: "Under the sink \"left\""))
        let (payload, auditPayload) = try await folder.queue.read { db in
            let row = try #require(try Row.fetchOne(db, sql: """
                SELECT q.payload, a.payload AS audit FROM mutation_queue q JOIN audit_log a ON a.seq = q.audit_seq
                """))
            return (row["payload"] as String, row["audit"] as Data)
        }
        #expect(payload.hasSuffix(#","fieldsInAudit":true}"#), "\(payload)")
        #expect(!payload.contains("Leak"))
        let mutation = try #require(try store.mutations().first)
        let decoded = try MutationQueue.decoder.decode([String: FieldValue].self, from: auditPayload)
        #expect(mutation.fields == decoded)
        #expect(mutation.fields["title"] == .text("Leak") && mutation.fields["details"] == .text("Under the sink \"left\""))
        #expect(mutation.clocks.count == mutation.fields.count)
        #expect(Set(mutation.clocks.values).count == 1)
        #expect(mutation.fields == issue.record.fields)
    }

    /// Folding an edit into the unsent mutation writes the union inline: the newer audit entry holds
    /// only the edit's fields, and the older one stays as it was.
    @Test func aFoldedMutationHoldsTheUnionItself() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        var issue = try await store.save(Issue(projectID: project, title: "Leak"))
        issue.status = .inProgress
        try await store.save(issue)
        let payload = try await folder.queue.read { try String.fetchOne($0, sql: "SELECT payload FROM mutation_queue") }
        #expect(payload?.contains(#""fields":{"#) == true)
        #expect(payload?.contains("fieldsInAudit") == false)
        let mutation = try #require(try store.mutations().first)
        #expect(mutation.fields["title"] == .text("Leak") && mutation.fields["status"] == .text("inProgress"))
        #expect(try store.verifyAudit().isIntact)
    }

    /// The queue cannot make up fields it no longer has: a missing audit entry is a named error, not
    /// an empty mutation sent over the server's record. Sending, that mutation alone fails, with why;
    /// the others still go.
    @Test func aMissingAuditEntryFailsItsMutationAlone() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        // The second entry's: the first is the plain one the second is primed against, and every
        // entry primed against a missing one is unreadable with it.
        let other = try await store.save(Issue(projectID: project, title: "Leak"))
        try await store.save(Issue(projectID: project, title: "Crack"))
        try await folder.queue.write { try $0.execute(sql: "DELETE FROM audit_log WHERE seq = 2") }
        #expect {
            try store.mutations()
        } throws: { error in
            // Named with the file it is in (the error said ": mutation 2 …", attack 59).
            (error as? StoreError)?.code == .databaseFailure && (error as? StoreError)?.path == folder.path
                && "\(error)".contains("keeps its fields in its audit entry, which is missing")
        }
        // Listed with why, the readable one whole: one damaged row made the whole list fail (attack 59,
        // finding 5: `outpost unsent` listed nothing).
        let unsent = try store.unsentChanges()
        #expect(unsent.map(\.recordID) == [other.id, unsent.last?.recordID].compactMap { $0 } && unsent.count == 2)
        #expect(unsent.first?.unreadable == nil && unsent.first?.fields["title"] == .text("Leak"))
        #expect(unsent.last?.unreadable?.contains("which is missing") == true && unsent.last?.fields.isEmpty == true)
        let claimed = try store.claimMutations(limit: 10, now: Date())
        #expect(claimed.map(\.recordID) == [other.id])
        #expect(claimed.first?.fields["title"] == .text("Leak"))
        let failed = try folder.queue.read {
            try Row.fetchAll($0, sql: "SELECT status, last_error FROM mutation_queue WHERE seq = 2")
        }
        #expect(failed.first?["status"] == "failed")
        #expect((failed.first?["last_error"] as String?)?.contains("which is missing") == true)
        #expect(try store.status().failedChanges == 1)
    }
}

/// Queue rows damaged by hand hold back only themselves (attack 60, findings 1 and 3): a `depends_on`
/// that is not JSON failed every claim, so no change went out again, and a payload that is not JSON made
/// `unsentChanges()` (and `outpost unsent`) list nothing.
@Suite(.fieldService) struct DamagedQueueRowTests {
    let project = UUID()

    @Test(arguments: [
        ("depends_on", "[[["), ("depends_on", "{\"not\": \"a list\"}"), ("payload", "not json"),
    ])
    func aDamagedRowIsListedAndFailsAloneAndTheOthersGo(column: String, value: String) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let first = try await store.save(Issue(projectID: project, title: "Leak"), now: Date(timeIntervalSince1970: 100))
        let damaged = try await store.save(Issue(projectID: project, title: "Crack"), now: Date(timeIntervalSince1970: 101))
        let last = try await store.save(Issue(projectID: project, title: "Stain"), now: Date(timeIntervalSince1970: 102))
        try await folder.queue.write {
            try $0.execute(sql: "UPDATE mutation_queue SET \(column) = ? WHERE seq = 2", arguments: [value])
        }
        let unsent = try store.unsentChanges()
        #expect(unsent.map(\.recordID) == [first.id, damaged.id, last.id])
        #expect(unsent.map { $0.unreadable != nil } == [false, true, false], "\(unsent.map(\.unreadable))")
        let claimed = try store.claimMutations(limit: 10, now: Date(timeIntervalSince1970: 200))
        #expect(claimed.map(\.recordID) == [first.id, last.id])
        let failed = try await folder.queue.read {
            try String.fetchAll($0, sql: "SELECT record_id FROM mutation_queue WHERE status = 'failed'")
        }
        #expect(failed == [damaged.id.storageText])
    }

    /// Attack 60, finding 4: a row in flight with no owner, or with a status no build writes, was never
    /// claimed: a user's write parked silently for good. Its idempotency key makes sending it again
    /// safe, so a run's start puts it in line as a pending one.
    @Test(arguments: [
        "status = 'inFlight', claimed_by = NULL, claim_expires_at = 9000000000000",
        "status = 'inFlight', claimed_by = NULL",
        "status = 'sending'",
    ])
    func aRowNoClaimWouldEverTakeIsSentAgain(damage: String) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let first = try await store.save(Issue(projectID: project, title: "Leak"), now: Date(timeIntervalSince1970: 100))
        let parked = try await store.save(Issue(projectID: project, title: "Crack"), now: Date(timeIntervalSince1970: 101))
        try await folder.queue.write { try $0.execute(sql: "UPDATE mutation_queue SET \(damage) WHERE seq = 2") }
        #expect(try store.unsentChanges().map(\.recordID) == [first.id, parked.id])
        #expect(try store.status().pendingChanges == 2)
        #expect(try store.recoverInterruptedRun(now: Date(timeIntervalSince1970: 200)) == 1)
        let claimed = try store.claimMutations(limit: 10, now: Date(timeIntervalSince1970: 200))
        #expect(claimed.map(\.recordID) == [first.id, parked.id])
    }
}

/// The field clocks of nearly every record (one clock for every catalog field, the server's the same,
/// no history) are stored as `@` and the clock, and read back as the long form did.
@Suite(.fieldService) struct ShortFieldClocksTests {
    /// Clocks across the encoding's range (its two ends and 500 drawn with a fixed seed) come back from
    /// the compact form as they went in.
    @Test func theCompactFormKeepsEveryClock() throws {
        var generator = SeededGenerator(seed: 41)
        let edges: [HybridTimestamp] = [
            HybridTimestamp(physicalMilliseconds: 0, counter: 0, node: NodeID(0)),
            HybridTimestamp(physicalMilliseconds: HybridTimestamp.maximumPhysicalMilliseconds, counter: .max, node: NodeID(.max)),
        ]
        let random = (0..<500).map { _ in
            HybridTimestamp(
                physicalMilliseconds: Int64.random(in: 0...HybridTimestamp.maximumPhysicalMilliseconds, using: &generator),
                counter: UInt16.random(in: 0...UInt16.max, using: &generator), node: NodeID(UInt64.random(in: 0...UInt64.max, using: &generator)))
        }
        for clock in edges + random {
            let text = FieldClocks.Stored.compactForm(of: clock)
            #expect(text.utf8.count == 23 && text.hasPrefix("#"))
            // The same text Foundation's encoder gives the clock's 16 bytes (the form files already hold).
            var bytes: [UInt8] = (0..<6).map { UInt8(truncatingIfNeeded: UInt64(clock.physicalMilliseconds) >> (8 * (5 - $0))) }
            bytes += [UInt8(clock.counter >> 8), UInt8(truncatingIfNeeded: clock.counter)]
            bytes += (0..<8).map { UInt8(truncatingIfNeeded: clock.node.rawValue >> (8 * (7 - $0))) }
            #expect(text == "#" + Data(bytes).base64EncodedString().dropLast(2))
            #expect(try FieldClocks.Stored.clock(ofCompactForm: text) == clock)
        }
        // Damaged: cut short, not base64, a marker alone. Each is refused, never read as another clock.
        for damaged in ["#", "#AAAA", "#" + String(repeating: "*", count: 22), "#" + String(repeating: "A", count: 23)] {
            #expect(throws: (any Error).self) { try FieldClocks.Stored.read(damaged, entity: .issue) }
        }
    }

    @Test func aRecordWithOneClockStoresTheShortFormAndReadsItBack() throws {
        let clock = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 3, node: NodeID(0x1a4f))
        let names = FieldClocks.catalogNames(of: .issue)
        let fields = Dictionary(uniqueKeysWithValues: names.map { ($0, clock) })
        let plain = FieldClocks.Stored(fields: fields, deletion: nil, server: fields)
        let text = try plain.encoded(for: .issue)
        #expect(text.hasPrefix("#") && text.utf8.count == 23, "the compact form (toolkit step 5): \(text)")
        let read = try FieldClocks.Stored.read(text, entity: .issue)
        #expect(read.fields == fields && read.server == fields && read.deletion == nil && read.pulled == nil)
        // The text form a build before step 5 wrote reads the same.
        let stepFour = try FieldClocks.Stored.read("@" + clock.encoded, entity: .issue)
        #expect(stepFour.fields == fields && stepFour.server == fields && stepFour.deletion == nil)
        // Anything more than the one clock keeps the JSON form.
        var deleted = plain
        deleted.deletion = clock
        var older = plain
        older.server = fields.mapValues { _ in HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: clock.node) }
        var held = plain
        held.heldVersion = 4
        for stored in [deleted, older, held] {
            let long = try stored.encoded(for: .issue)
            #expect(long.hasPrefix("{"), "\(long)")
            let back = try FieldClocks.Stored.read(long, entity: .issue)
            #expect(back.fields == stored.fields && back.server == stored.server && back.deletion == stored.deletion
                && back.heldVersion == stored.heldVersion)
        }
    }
}

/// `"allFieldsAt"` in `field_clocks` stands for the catalog fields as this build knows them. A change
/// to any entity's catalog fields makes this fail first: the step that adds the field must rewrite
/// that entity's `allFieldsAt` rows as `byClock` lists (Workspace.md, "How to add a migration step"), and then
/// record the new names here.
@Suite(.fieldService) struct AllFieldsAtCatalogTests {
    @Test func theCatalogFieldsAreTheOnesAllFieldsAtWasWrittenFor() {
        let names = EntityCatalog.all.map { "\($0.type.rawValue): \($0.fields.map(\.name).joined(separator: ","))" }
            .sorted()
        #expect(names == Self.recorded, "catalog fields changed; see this suite's note before recording them here")
    }

    static let recorded = [
        "asset: projectID,name,qrCode,category,location",
        "comment: issueID,authorID,body",
        "dailyLog: projectID,authorID,day,notes,weather,crew,crewSize,hours",
        "discount: projectID,name,kind,value",
        "fee: projectID,name,amountCents,isTaxable",
        "financeOption: projectID,lender,termMonths,aprBasisPoints,downPaymentCents",
        "issue: projectID,title,details,status,priority,assigneeID,latitude,longitude,assetID,modelElementID",
        "measure: measureSheetID,label,quantity,unit,sortOrder",
        "measureSheet: scopeID,name,notes",
        "mediaAttachment: issueID,dailyLogID,kind,fileName,contentType,byteSize,sha256,thumbnail,capturedAt,durationSeconds",
        "member: projectID,userID,name,email,role",
        "opportunity: name,customerName,address,stage,estimatedValueCents",
        "project: opportunityID,name,number,address,status,startDay",
        "referenceDocument: projectID,title,kind,revision,fileName,byteSize,sha256",
        "scope: projectID,name,notes,sortOrder",
        "scopeItem: scopeID,measureID,name,quantity,unit,unitPriceCents,sortOrder",
        "timeEntry: projectID,memberID,kind,recordedAt,clockInID,latitude,longitude,note",
    ]
}
