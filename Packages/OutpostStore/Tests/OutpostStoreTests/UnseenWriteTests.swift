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

/// A pulled version numbered below the one the device holds was taken for a page read before a newer
/// one (two pulls at once) and left. But a version number the device holds can be wrong: a broken
/// server's push answer said 1,002 for version 2, and every later change of the record (an office edit,
/// the device's own next edits, answered with the server's version 3 as a conflict) was left behind it
/// for good, the record stuck (attack 132, F1). A version that carries a write the device has never seen
/// (a field clock, or a delete, newer than any it holds for that field) is no such page, whatever its
/// number: it is taken.
@Suite(.fieldService) struct UnseenWriteTests {
    let server = NodeID(0x0FF1CE)
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let fields = ["title", "details", "status", "priority", "latitude", "longitude"]

    /// The server's whole record at `version`: each field as and when it was last written.
    func whole(
        _ issue: OutpostModels.Issue, version: Int64, written: [String: (FieldValue, HybridTimestamp)], deletion: HybridTimestamp? = nil
    ) throws -> VersionedRecord {
        var record = issue.record
        record.sync.version = version
        record.sync.serverID = nil
        var clocks: [String: HybridTimestamp] = [:]
        let created = HybridTimestamp(physicalMilliseconds: 1_000, counter: 0, node: server)
        for field in record.fields.keys { clocks[field] = created }
        for (field, (value, stamp)) in written {
            record[field] = value
            clocks[field] = stamp
        }
        let newest = clocks.values.max() ?? created
        record.sync.updatedAt = newest.date
        return try VersionedRecord(record: record, clocks: clocks, deletion: deletion)
    }

    func stamp(_ milliseconds: Int64, _ node: NodeID? = nil) -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: node ?? server)
    }

    /// The attack's sequence: an edit answered with a version 1,000 ahead, then an office edit of two
    /// other fields: the office's values arrive, the number is the server's again, and the next edit goes
    /// out on it.
    @Test func aVersionAfterAWrongAnswerIsTakenAndTheRecordMovesOn() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = OutpostModels.Issue(projectID: UUID(), title: "Loose rail")
        _ = try await store.applyPulledPage(PulledPage(changes: [try whole(issue, version: 1, written: [:])], cursor: "1"), now: now)
        var edited = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        edited.title = "Loose rail, stairs"
        try await store.save(edited, now: now)
        let sent = try #require(try store.unsentChanges().first)
        let titleStamp = try #require(sent.clocks["title"])
        try store.acknowledge(sent, serverVersion: 1_002, serverID: nil, now: now)
        #expect(try store.record(.issue, id: issue.id)?.sync.version == 1_002)
        // The server's version 3: the device's title (its version 2) and the office's edit since.
        let office = stamp(now.storageMilliseconds + 10_000, NodeID(0xABC))
        let third = try whole(issue, version: 3, written: [
            "title": (.text("Loose rail, stairs"), titleStamp), "details": (.text("office edit"), office),
            "status": (.text("resolved"), office),
        ])
        let report = try await store.applyPulledPage(PulledPage(changes: [third], cursor: "3"), now: now)
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held["details"] == .text("office edit") && held["status"] == .text("resolved"), "\(held)")
        #expect(held["title"] == .text("Loose rail, stairs") && held.sync.version == 3)
        #expect(report.unchanged == 0 && report.applied == 1)
        var again = try #require(try store.fetch(OutpostModels.Issue.self, id: issue.id))
        again.details = "device later edit"
        try await store.save(again, now: now)
        #expect(try store.unsentChanges().map(\.baseVersion) == [3])
    }

    /// A page read before a newer one brings nothing the device has not seen: still left, live or
    /// deleted (a live copy read before a delete does not bring the record back).
    @Test(arguments: [false, true])
    func aPageReadBeforeANewerOneIsStillLeft(newerIsADelete: Bool) async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = OutpostModels.Issue(projectID: UUID(), title: "Loose rail")
        let older = try whole(issue, version: 4, written: ["title": (.text("four"), stamp(4_000))])
        let newer = try whole(
            issue, version: 5, written: ["title": (.text("four"), stamp(4_000)), "details": (.text("five"), stamp(5_000))],
            deletion: newerIsADelete ? stamp(5_500) : nil)
        _ = try await store.applyPulledPage(PulledPage(changes: [newer], cursor: "5"), now: now)
        _ = try await store.applyPulledPage(PulledPage(changes: [older], cursor: "5"), now: now)
        let held = try #require(try store.record(.issue, id: issue.id))
        #expect(held.sync.version == 5 && held["details"] == .text("five") && held.sync.isDeleted == newerIsADelete, "\(held)")
    }

    /// The law, over 300 seeded histories of a record: the server's versions, each writing some fields
    /// at a later stamp (and perhaps deleting it, or bringing it back), arrive one page each in any
    /// order, and at a random moment the device's number for the record jumps far ahead (a wrong
    /// answer). Whatever the order, the device ends holding the latest version's values and state.
    @Test func anyOrderOfAHistoryEndsAtItsLatestVersionWhateverTheNumberHeld() async throws {
        var random = SeededGenerator(seed: 0x1F132)
        // One store: each round's record is a record of its own.
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        for round in 0..<300 {
            let issue = OutpostModels.Issue(projectID: UUID(), title: "Loose rail")
            var written: [String: (FieldValue, HybridTimestamp)] = [:]
            var deletion: HybridTimestamp?
            var history: [VersionedRecord] = []
            let count = Int.random(in: 2...6, using: &random)
            for version in 1...count {
                let at = stamp(Int64(version) * 1_000 + 10_000)
                if version > 1, Int.random(in: 0..<5, using: &random) == 0 {
                    deletion = deletion == nil ? at : nil  // deleted, or brought back by a write below
                }
                if deletion == nil || version == 1 {
                    for field in Self.fields.shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random)) {
                        let value: FieldValue = switch field {
                        case "status": .text(["open", "inProgress", "resolved", "closed"][version % 4])
                        case "priority": .text(["low", "medium", "high", "critical"][version % 4])
                        case "latitude", "longitude": .real(Double(version))
                        default: .text("\(field) \(version)")
                        }
                        written[field] = (value, at)
                    }
                }
                history.append(try whole(issue, version: Int64(version), written: written, deletion: deletion))
            }
            let latest = history[count - 1]
            let order = history.shuffled(using: &random)
            let jump = Int.random(in: 0...order.count, using: &random)
            for (index, version) in order.enumerated() {
                if index == jump { try Self.moveNumberAhead(of: issue.id, in: folder) }
                _ = try await store.applyPulledPage(PulledPage(changes: [version], cursor: "\(round)-\(index)"), now: now)
            }
            let held = try #require(try store.record(.issue, id: issue.id))
            #expect(held.fields == latest.record.fields && held.sync.isDeleted == latest.isDeleted,
                "round \(round): order \(order.map(\.record.sync.version)), jump at \(jump): held \(held.fields), latest \(latest.record.fields)")
        }
    }

    /// A wrong number from anywhere: the held version moved 1,000 ahead, as a broken answer moves it.
    static func moveNumberAhead(of id: UUID, in folder: TemporaryDatabase) throws {
        try folder.queue.write { db in
            try db.execute(sql: "UPDATE issues SET version = version + 1000 WHERE id = ?", arguments: [id.storageText])
        }
    }
}
