@testable import OutpostStore
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// A screen open during "pre-sync this project" refreshes: every record an import writes reaches
/// `changes()`, as every record a pull writes does, in this process and in another on the same file.
@Suite(.fieldService) struct ImportChangesTests {
    /// The distinct records `stream` names until `count` of them came or 60 seconds passed.
    func collect(_ count: Int, from stream: AsyncStream<StoreChange>) async -> Set<UUID> {
        await withTaskGroup(of: Set<UUID>.self) { group in
            group.addTask {
                var seen: Set<UUID> = []
                for await change in stream {
                    seen.insert(change.recordID)
                    if seen.count == count { break }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))
                return []
            }
            let first = await group.next() ?? []
            group.cancelAll()
            return first
        }
    }

    @Test("A subscriber hears of every record a bundle import and a pull wrote, here and in another process")
    func importAndPullReachSubscribers() async throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.json")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)
        let target = try workspace.database("device.sqlite")
        let app = try LocalStore.open(at: target)
        let widget = try LocalStore.open(at: target)  // another process's store on the same file
        let here = app.changes(), there = widget.changes()

        let summary = try app.importBundle(at: url)
        let imported = Set(SampleProject.records.map(\.id))
        #expect(summary.total.inserted == imported.count)
        #expect(await collect(imported.count, from: here) == imported)
        #expect(await collect(imported.count, from: there) == imported)

        // The same bundle again writes nothing, so it tells nothing; a pull that changes two records does.
        #expect(try app.importBundle(at: url).total.unchanged == imported.count)
        var pulled: [VersionedRecord] = []
        for id in [SampleProject.id(50), SampleProject.id(51)] {
            var record = try #require(try app.record(.issue, id: id))
            record["title"] = .text("Renamed in the office")
            record.sync.version += 1
            pulled.append(VersionedRecord(
                record: record, stampedAt: HybridTimestamp(physicalMilliseconds: 1_800_000_000_000, counter: 0, node: NodeID(9))))
        }
        try await app.applyPulledPage(PulledPage(changes: pulled, cursor: "7"))
        let expected = Set(pulled.map(\.record.id))
        #expect(await collect(2, from: here) == expected, "nothing else in between: the second import wrote nothing")
        #expect(await collect(2, from: there) == expected)
    }
}

/// Attack 66 F4: a pre-sync wrote a 715 MB bundle into the store with 9 MB free. An import keeps the
/// room a pull keeps: refused with nothing written, before it starts and as it goes.
@Suite(.fieldService) struct ImportKeepsRoomTests {
    @Test func anImportIsRefusedWhileTheVolumeHasLessFreeSpaceThanTheStoreKeeps() throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.json")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: url)
        let target = try workspace.database("device.sqlite")
        let full = try LocalStore.open(at: target, keepingFree: Int64.max / 2)
        do {
            try full.importBundle(at: url)
            Issue.record("a bundle was imported with no room kept")
        } catch {
            #expect(error.code == .limitExceeded)
            #expect((error.underlying as? StoreError)?.code == .storageFull, "\(error)")
        }
        #expect(try full.record(.project, id: SampleProject.project) == nil, "nothing was written")
        #expect(try LocalStore.open(at: target, keepingFree: 0).importBundle(at: url).total.inserted == SampleProject.records.count)
    }
}
