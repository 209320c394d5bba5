@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// What an import does to a database that already holds data.
@Suite(.fieldService) struct ImportSemanticsTests {
    /// A workspace whose database holds the sample project, and its XML export.
    func exported(_ format: BundleFormat = .xml) throws -> (Workspace, URL) {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.\(format.rawValue)")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: url)
        return (workspace, url)
    }

    @Test func importingTheSameBundleTwiceChangesNothingTheSecondTime() throws {
        let (workspace, url) = try exported()
        let target = try workspace.database("target.sqlite")
        let first = try LocalStore.open(at: target).importBundle(at: url)
        let bytes = try workspace.snapshot(of: target)
        let second = try LocalStore.open(at: target).importBundle(at: url)
        #expect(first.total.inserted == SampleProject.records.count)
        #expect(second.total.unchanged == SampleProject.records.count)
        #expect(second.total.inserted + second.total.updated == 0)
        #expect(try workspace.snapshot(of: target) == bytes)
    }

    /// Exports leave tombstones out now (a deleted record's contents stay where they are), but a bundle
    /// from an older server or device still carries them, and its delete still applies.
    @Test func aTombstoneInAnOlderBundleDeletesTheHeldCopyAndANewExportLeavesItOut() throws {
        let (workspace, url) = try exported(.json)
        let target = try workspace.database("target.sqlite")
        try LocalStore.open(at: target).importBundle(at: url)
        // The older form: the tombstone with its fields, as the example bundles had it.
        var bundle = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var records = try #require(bundle["records"] as? [[String: Any]])
        let index = try #require(records.firstIndex { ($0["id"] as? String) == "0b5e55ed-0000-4000-8000-000000000051" })
        records[index]["version"] = 2
        records[index]["deletedAt"] = "2026-11-18T11:11:40.125Z"
        bundle["records"] = records
        let older = workspace.url("older.json")
        try JSONSerialization.data(withJSONObject: bundle).write(to: older)
        let summary = try LocalStore.open(at: target).importBundle(at: older)
        #expect(summary.total.updated == 1)
        let held = try #require(try workspace.record(.issue, SampleProject.id(51), in: target))
        #expect(held.sync.isDeleted && held.sync.version == 2)
        // Exported again, the deleted issue is not in the bundle.
        let again = workspace.url("again.json")
        try LocalStore.open(at: target).exportBundle(project: SampleProject.project, format: .json, to: again)
        #expect(try !String(contentsOf: again, encoding: .utf8).contains("0b5e55ed-0000-4000-8000-000000000051"))
    }

    /// An attack on the import found a date before the Gregorian reform read in one calendar and
    /// written in another: each export and import moved it ten days, and re-importing never settled.
    @Test func anExportOfAnImportedOldDateImportsAsUnchanged() throws {
        for format in [BundleFormat.json, .xml] {
            let (workspace, url) = try exported(.json)
            var bundle = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
            var records = try #require(bundle["records"] as? [[String: Any]])
            let index = try #require(records.firstIndex { ($0["id"] as? String) == "0b5e55ed-0000-4000-8000-000000000051" })
            records[index]["createdAt"] = "1500-06-01T00:00:00.000Z"
            bundle["records"] = records
            let old = workspace.url("old.json")
            try JSONSerialization.data(withJSONObject: bundle).write(to: old)
            let target = try workspace.database("target.sqlite")
            try LocalStore.open(at: target).importBundle(at: old)
            let exported = workspace.url("exported.\(format.rawValue)")
            try LocalStore.open(at: target).exportBundle(project: SampleProject.project, format: format, to: exported)
            #expect(try String(contentsOf: exported, encoding: .utf8).contains("1500-06-01T00:00:00.000Z"), "\(format)")
            let again = try LocalStore.open(at: target).importBundle(at: exported)
            #expect(again.total.updated == 0 && again.total.inserted == 0, "\(format): \(again.total)")
        }
    }

    @Test func aNewerBundleUpdatesOnlyWhatChanged() throws {
        let (workspace, url) = try exported()
        let target = try workspace.database("target.sqlite")
        try LocalStore.open(at: target).importBundle(at: url)
        var issue = try #require(try workspace.record(.issue, SampleProject.id(51)))
        issue["status"] = .text("resolved")
        issue.sync.version += 1
        try workspace.save([issue])
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)
        let summary = try LocalStore.open(at: target).importBundle(at: url)
        #expect(summary.total.updated == 1)
        #expect(summary.byEntity["issue"]?.updated == 1)
        #expect(summary.total.unchanged == SampleProject.records.count - 1)
        #expect(try workspace.record(.issue, issue.id, in: target)?["status"] == .text("resolved"))
    }

    @Test func aScreenThatReadARecordBeforeAnImportDoesNotSendBackTheValuesTheImportReplaced() async throws {
        let (workspace, url) = try exported()
        let target = try workspace.database("target.sqlite")
        try LocalStore.open(at: target).importBundle(at: url)
        let store = try LocalStore.open(at: target)
        // A detail screen reads the issue before the night's pre-sync…
        var onScreen = try #require(try store.fetch(Issue.self, id: SampleProject.id(51)))
        // …the office resolved it meanwhile, and the pre-sync brings that…
        var office = try #require(try workspace.record(.issue, SampleProject.id(51)))
        office["status"] = .text("resolved")
        office.sync.version += 1
        try workspace.save([office])
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)
        try LocalStore.open(at: target).importBundle(at: url)
        // …then the user edits only the title and saves the copy still on screen.
        #expect(onScreen.status != .resolved)
        onScreen.title = "Outlet cover cracked, photo taken"
        let saved = try await store.save(onScreen)
        #expect(saved.status == .resolved, "the office's status stays")
        let queued = try #require(try store.mutations().last)
        #expect(Set(queued.fields.keys) == ["title"], "only the user's edit goes to the server")
    }

    @Test func anExportCarriesOnlyTheProjectsOwnRecordsWhateverElseNamesThem() throws {
        let workspace = try Workspace()
        let otherProject = Project(id: SampleProject.id(900), sync: SampleProject.sync(1), name: "Oak Avenue").record
        let issue = Issue(id: SampleProject.id(901), sync: SampleProject.sync(1), projectID: otherProject.id,
            title: "Side gate", assigneeID: SampleProject.foreman).record
        let comment = Comment(id: SampleProject.id(902), sync: SampleProject.sync(1), issueID: issue.id,
            authorID: SampleProject.foreman, body: "Gate code 4471").record
        try workspace.save(SampleProject.records + [otherProject, issue, comment])
        let url = workspace.url("bundle.json")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)
        let target = try workspace.database("target.sqlite")
        try LocalStore.open(at: target).importBundle(at: url)
        let exported = Set(try workspace.contents(of: target).map(\.id))
        #expect(exported == Set(SampleProject.records.map(\.id)))
        #expect(!exported.contains(issue.id) && !exported.contains(comment.id))
    }

    @Test func anExportLeavesOutChangesTheServerHasNotAcknowledged() throws {
        let workspace = try Workspace()
        var edited = try #require(SampleProject.records.first { $0.id == SampleProject.id(51) })
        edited["title"] = .text("Edited offline, not synced")
        edited.sync.syncStatus = .pending
        var created = Issue(id: SampleProject.id(950), sync: SampleProject.sync(1, version: 0), projectID: SampleProject.project,
            title: "Created offline").record
        created.sync.syncStatus = .pending
        try workspace.save(SampleProject.records.filter { $0.id != edited.id } + [edited, created])
        let url = workspace.url("bundle.json")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)
        let target = try workspace.database("target.sqlite")
        try LocalStore.open(at: target).importBundle(at: url)
        let exported = try workspace.contents(of: target)
        #expect(!exported.contains { $0.id == edited.id || $0.id == created.id })
        #expect(!exported.contains { $0["title"] == .text("Edited offline, not synced") })
    }

    @Test(arguments: [SyncStatus.pending, .failed, .conflicted])
    func aRecordWithUnsyncedLocalChangesIsNeverOverwritten(status: SyncStatus) throws {
        let (workspace, url) = try exported()
        let target = try workspace.database("target.sqlite")
        var local = try #require(SampleProject.records.first { $0.id == SampleProject.id(50) })
        local["title"] = .text("Cracked tile — edited offline")
        local.sync.syncStatus = status
        try workspace.save([local], in: target)
        let summary = try LocalStore.open(at: target).importBundle(at: url)
        #expect(summary.total.skippedLocallyModified == 1)
        #expect(summary.byEntity["issue"]?.skippedLocallyModified == 1)
        #expect(try workspace.record(.issue, local.id, in: target) == local)
    }

    @Test func aStoredNewerServerVersionIsKept() throws {
        let (workspace, url) = try exported()
        let target = try workspace.database("target.sqlite")
        var newer = try #require(SampleProject.records.first { $0.id == SampleProject.id(51) })
        newer.sync.version = 99
        newer["title"] = .text("Outlet cover fitted")
        try workspace.save([newer], in: target)
        let summary = try LocalStore.open(at: target).importBundle(at: url)
        #expect(summary.total.skippedOutdated == 1)
        #expect(try workspace.record(.issue, newer.id, in: target) == newer)
    }

    /// A bundle's checkpoints wait on the device until the server confirms them; an export carries
    /// them on. Past what an export could carry, an import is refused and changes nothing.
    @Test func checkpointsABundleCarriesWaitForTheServerAndTravelOn() throws {
        let (workspace, url) = try exported(.json)
        let text = try String(contentsOf: url, encoding: .utf8)
        func carrying(_ name: String, _ checkpoints: [String]) throws -> URL {
            let list = checkpoints.map { "\"\($0)\"" }.joined(separator: ", ")
            return try workspace.file(name, text.replacingOccurrences(
                of: "\"formatVersion\": 2,", with: "\"formatVersion\": 2, \"checkpoints\": [\(list)],"))
        }
        let first = (1...62).map { "\($0).0123456789abcdef" }
        let target = try workspace.database("target.sqlite")
        let store = try LocalStore.open(at: target)
        try store.importBundle(at: carrying("a.json", first))
        try store.importBundle(at: carrying("b.json", ["7.0123456789abcdef", "63.0123456789abcdef"]))
        #expect(try store.importedCheckpoints() == first + ["63.0123456789abcdef"], "kept once each, oldest first")
        let export = workspace.url("export.xml")
        try store.exportBundle(project: SampleProject.project, format: .xml, to: export)
        let exported = try String(contentsOf: export, encoding: .utf8)
        #expect(exported.contains("checkpoints=\"\((first + ["63.0123456789abcdef"]).joined(separator: " "))\""))
        try store.importBundle(at: carrying("c.json", ["64.0123456789abcdef"]))
        let before = try workspace.snapshot(of: target)
        #expect(throws: BundleError.self) { try store.importBundle(at: carrying("d.json", ["65.0123456789abcdef"])) }
        #expect(try workspace.snapshot(of: target) == before, "refused whole")
        try store.confirmImportedCheckpoint("5.0123456789abcdef")
        try store.importBundle(at: carrying("d.json", ["65.0123456789abcdef"]))
        #expect(try store.importedCheckpoints().count == 64)
        // A header may carry 64 (an export's own and 63 waiting). A device with no checkpoint of its own
        // keeps them all, and its export carries them on (a device that refused them could not import
        // another device's export, attack 123, F3); one more is refused with the count it would leave.
        let fresh = try LocalStore.open(at: try workspace.database("fresh.sqlite"))
        let full = (1...64).map { "\($0 + 100).0123456789abcdef" }
        try fresh.importBundle(at: carrying("full.json", full))
        #expect(try fresh.importedCheckpoints() == full)
        let freshExport = workspace.url("fresh-export.json")
        try fresh.exportBundle(project: SampleProject.project, format: .json, to: freshExport)
        let reimporting = try LocalStore.open(at: try workspace.database("reimporting.sqlite"))
        try reimporting.importBundle(at: freshExport)
        #expect(try reimporting.importedCheckpoints() == full, "an export of 64 imports on another fresh device")
        #expect {
            try fresh.importBundle(at: carrying("more.json", ["999.0123456789abcdef"]))
        } throws: { error in
            (error as? BundleError)?.message.contains("would leave 65 checkpoints") == true
        }
        // Should its own come from a push before a pull had the server confirm them, an export asks for a
        // sync rather than leave one out.
        try fresh.write { db in try HistoryState.save(checkpoint: "901.0123456789abcdef", in: db) }
        #expect {
            try fresh.exportBundle(project: SampleProject.project, format: .json, to: workspace.url("too-many.json"))
        } throws: { error in
            (error as? BundleError)?.code == .limitExceeded && (error as? BundleError)?.message.contains("sync, then export again") == true
        }
        try fresh.confirmImportedCheckpoint(full[0])
        try fresh.exportBundle(project: SampleProject.project, format: .json, to: workspace.url("after-a-confirm.json"))
        try fresh.write { db in try db.execute(sql: "DELETE FROM sync_state WHERE key = ?", arguments: [HistoryState.checkpointKey]) }
        try fresh.importBundle(at: carrying("first-again.json", [full[0]]))
        // With a checkpoint of its own, a device keeps 63, so its export carries its own with them.
        let synced = try LocalStore.open(at: try workspace.database("synced.sqlite"))
        try synced.write { db in try HistoryState.save(checkpoint: "900.0123456789abcdef", in: db) }
        #expect {
            try synced.importBundle(at: carrying("full.json", full))
        } throws: { error in
            (error as? BundleError)?.message.contains("would leave 64 checkpoints of the server's history waiting for the server to confirm them, more than the 63") == true
        }
        try synced.importBundle(at: carrying("most.json", Array(full.prefix(63))))
        let syncedExport = workspace.url("synced-export.xml")
        try synced.exportBundle(project: SampleProject.project, format: .xml, to: syncedExport)
        let carried = try String(contentsOf: syncedExport, encoding: .utf8)
        #expect(carried.contains("checkpoints=\"\((["900.0123456789abcdef"] + full.prefix(63)).joined(separator: " "))\""))
        let versionOne = try workspace.file("v1.json", text.replacingOccurrences(
            of: "\"formatVersion\": 2,", with: "\"formatVersion\": 1, \"checkpoints\": [\"5.0123456789abcdef\"],"))
        #expect(throws: BundleError.self) { try fresh.importBundle(at: versionOne) }
        #expect(try fresh.importedCheckpoints() == Array(full.dropFirst()) + [full[0]], "kept as they were")
    }

    /// Two pre-syncs of one project overlapped, the older bundle imported last: it brought back records
    /// deleted between the two snapshots, and the next pull, starting at the newer bundle's position, never
    /// sent their deletes (attack 125, F1). An import that keeps no position forgets the one kept before.
    @Test func anOlderServerBundleImportedAfterANewerOneLeavesNoPositionPastIt() throws {
        let (workspace, url) = try exported(.json)
        // A server that names records by their own ids keeps no position (a pull links them): these have none.
        let text = try String(contentsOf: url, encoding: .utf8)
            .replacingOccurrences(of: #""serverID": "[^"]*", "#, with: "", options: .regularExpression)
        func fromServer(_ name: String, _ checkpoint: String, dropping dropped: UUID? = nil) throws -> URL {
            var lines = text.replacingOccurrences(of: "\"formatVersion\": 2,", with: "\"formatVersion\": 2, \"checkpoints\": [\"\(checkpoint)\"],")
                .components(separatedBy: "\n")
            if let dropped { lines.removeAll { $0.contains("\"id\": \"\(dropped.uuidString.lowercased())\"") } }
            // The line before the closing bracket must not end in a comma once a record is gone.
            var joined = lines.joined(separator: "\n").replacingOccurrences(of: "},\n  ]", with: "}\n  ]")
            if !joined.contains("\n  ]") { joined = lines.joined(separator: "\n") }
            return try workspace.file(name, joined)
        }
        // The newer snapshot no longer holds an issue the office deleted; the older one does.
        let deleted = try #require(SampleProject.records.last { $0.entity == .issue }).id
        let newer = try fromServer("newer.json", "90.0123456789abcdef", dropping: deleted)
        let older = try fromServer("older.json", "50.0123456789abcdef")
        let store = try LocalStore.open(at: try workspace.database("device.sqlite"))
        try store.importBundle(at: newer, fromServer: true)
        #expect(try store.bundlePositions().count == 1, "a fresh device keeps the newer bundle's position")
        try store.importBundle(at: older, fromServer: true)
        #expect(try workspace.record(.issue, deleted, in: store.path) != nil, "the older bundle brought the issue back")
        #expect(try store.bundlePositions().isEmpty, "no position past the delete the older bundle predates")
    }

    @Test func aRecordWhoseParentIsMissingIsKeptAndFlagged() throws {
        let workspace = try Workspace()
        let strayIssue = SampleProject.id(777)
        let comment = Comment(id: SampleProject.id(778), sync: SampleProject.sync(1), issueID: strayIssue,
            authorID: SampleProject.foreman, body: "Whose issue is this?").record
        let json = """
            {"format": "outpost-bundle", "formatVersion": 1, "projectID": "\(SampleProject.project.uuidString.lowercased())",
             "records": [
               {"entity": "comment", "id": "\(comment.id.uuidString.lowercased())", "version": 1,
                "createdAt": "2026-11-18T11:06:40.125Z", "updatedAt": "2026-11-18T11:07:40.125Z",
                "fields": {"issueID": "\(strayIssue.uuidString.lowercased())", "authorID": "\(SampleProject.foreman.uuidString.lowercased())", "body": "Whose issue is this?"}}
             ]}
            """
        let url = try workspace.file("orphan.json", json)
        let summary = try LocalStore.open(at: workspace.databasePath).importBundle(at: url)
        #expect(summary.total.inserted == 1)
        #expect(summary.total.orphaned == 1)
        #expect(try workspace.record(.comment, comment.id)?.sync.isOrphaned == true)
        // Once the parents arrive, the same bundle plus them settles the flag.
        let again = try LocalStore.open(at: workspace.databasePath).importBundle(at: url)
        #expect(again.total.unchanged == 1 && again.total.orphaned == 1)
    }

    @Test func aChildListedBeforeItsParentIsNotOrphaned() throws {
        let (workspace, url) = try exported(.json)
        // Reverse the records so every child comes before its parent.
        let text = try String(contentsOf: url, encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        let recordLines = lines.filter { $0.hasPrefix("    {\"entity\"") }.map { $0.hasSuffix(",") ? String($0.dropLast()) : $0 }
        let reversed = lines.prefix { !$0.hasPrefix("    {\"entity\"") }.joined(separator: "\n") + "\n"
            + recordLines.reversed().joined(separator: ",\n") + "\n  ]\n}\n"
        let reversedURL = try workspace.file("reversed.json", reversed)
        let target = try workspace.database("target.sqlite")
        let summary = try LocalStore.open(at: target).importBundle(at: reversedURL)
        #expect(summary.total.inserted == SampleProject.records.count)
        #expect(summary.total.orphaned == 0)
        #expect(try workspace.contents(of: target) == workspace.contents())
        let again = try LocalStore.open(at: target).importBundle(at: reversedURL)
        #expect(again.total.unchanged == SampleProject.records.count)
    }

    @Test func progressIsReportedAsItGoes() throws {
        let (workspace, url) = try exported()
        let reports = Reports()
        let target = try workspace.database("target.sqlite")
        try LocalStore.open(at: target).importBundle(at: url) { reports.append($0) }
        let last = try #require(reports.all.last)
        #expect(last.records == SampleProject.records.count)
        #expect(last.bytesRead == last.totalBytes && last.totalBytes > 0)
    }

    final class Reports: @unchecked Sendable {
        private let lock = NSLock()
        private var reports: [ImportProgress] = []
        func append(_ report: ImportProgress) { lock.withLock { reports.append(report) } }
        var all: [ImportProgress] { lock.withLock { reports } }
    }
}

/// A newer bundle meeting a record the crew edited offline, on a real store with its queue.
@Suite(.fieldService) struct LocalChangeImportTests {
    @Test func aNewerBundleRefreshesOnlyTheFieldsTheDeviceDidNotChange() async throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.xml")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .xml, to: url)
        let device = workspace.url("device.sqlite").path
        try LocalStore.open(at: device).importBundle(at: url)

        // Offline, the crew retitles the issue.
        let store = try LocalStore.open(at: device)
        var edited = try #require(try store.record(.issue, id: SampleProject.id(51)))
        let baseVersion = edited.sync.version
        edited["title"] = .text("Outlet cover cracked, replace")
        try await store.save(edited)

        // Meanwhile the office resolves it: the next bundle carries a newer version with another status.
        var office = try #require(try workspace.record(.issue, SampleProject.id(51)))
        office["status"] = .text("resolved")
        office.sync.version += 1
        office.sync.updatedAt = office.sync.updatedAt.addingTimeInterval(60)
        try workspace.save([office])
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)

        let summary = try LocalStore.open(at: device).importBundle(at: url)
        #expect(summary.byEntity["issue"]?.refreshedAroundLocalChanges == 1)
        #expect(summary.total.updated == 0)
        let stored = try #require(try store.record(.issue, id: SampleProject.id(51)))
        #expect(stored["title"] == .text("Outlet cover cracked, replace"), "the local change is never overwritten")
        #expect(stored["status"] == .text("resolved"), "a field the device did not change takes the newer version")
        #expect(stored.sync.version == office.sync.version)
        #expect(stored.sync.syncStatus == .pending)
        // The change still goes out on the version it was made on, so the server and then the engine settle
        // it through the entity's policy with the true clocks.
        let waiting = try store.mutations(status: .pending).filter { $0.recordID == SampleProject.id(51) }
        #expect(waiting.count == 1)
        #expect(waiting.first?.baseVersion == baseVersion)
        #expect(waiting.first.map { Set($0.fields.keys) } == ["title"])

        // The same bundle again brings nothing newer: kept, counted, nothing written.
        let bytes = try workspace.snapshot(of: device)
        let again = try LocalStore.open(at: device).importBundle(at: url)
        #expect(again.byEntity["issue"]?.skippedLocallyModified == 1)
        #expect(try workspace.snapshot(of: device) == bytes)
    }
}
