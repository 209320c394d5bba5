@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

private typealias Issue = OutpostModels.Issue

@Suite(.fieldService) struct RecordListTests {
    let project = UUID()
    let elsewhere = UUID()

    /// 300 issues of the project (creation times drawn from a few, so many tie and go by id) and some of
    /// another project, written in a shuffled order.
    func filledStore(_ folder: TemporaryDatabase, seed: UInt64) async throws -> LocalStore {
        let store = try LocalStore.open(at: folder.path)
        var random = SeededGenerator(seed: seed)
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        for index in 0..<360 {
            let created = start.addingTimeInterval(Double(Int.random(in: 0..<40, using: &random)))
            try await store.save(Issue(
                sync: SyncMetadata(createdAt: created), projectID: index % 6 == 5 ? elsewhere : project,
                title: "Issue \(index)", details: String(repeating: "é", count: index % 7)))
        }
        return store
    }

    @Test(arguments: [11, 2026] as [UInt64])
    func windowsReadInTurnGiveTheTypedListInItsOrder(seed: UInt64) async throws {
        let folder = try TemporaryDatabase()
        let store = try await filledStore(folder, seed: seed)
        let eager = try store.fetchAll(Issue.self, where: "projectID", equals: .uuid(project))
        let list = try store.list(Issue.self, where: "projectID", equals: .uuid(project))
        #expect(list.count == 300)
        #expect(list.ids == eager.map(\.id))

        // Windows of random sizes, end to end, then random windows anywhere.
        var random = SeededGenerator(seed: seed &+ 1)
        var joined: [Issue] = []
        var start = 0
        while start < list.count {
            let end = min(list.count, start + Int.random(in: 0...70, using: &random))
            let window = try list.fetch(start..<end)
            #expect(window.count == end - start && !window.contains(nil))
            joined += window.compactMap { $0 }
            start = end
        }
        #expect(joined == eager)
        for _ in 0..<20 {
            let lower = Int.random(in: 0...list.count, using: &random)
            let upper = Int.random(in: lower...list.count, using: &random)
            #expect(try list.fetch(lower..<upper) == eager[lower..<upper].map(Optional.some))
        }
    }

    @Test func aListIsTheStoreAsItWasWhenItWasMade() async throws {
        let folder = try TemporaryDatabase()
        let store = try await filledStore(folder, seed: 5)
        let list = try store.list(Issue.self, where: "projectID", equals: .uuid(project))
        let before = try list.fetch(0..<10)

        // Delete one, take one out of the list's filter, edit one, and create one dated first of all. No
        // write through the store moves a record to another project (`ProjectMoveTests`): the row is
        // changed under it, as another writer of the file could.
        #expect(try await store.delete(.issue, id: #require(before[1]).id))
        let moved = try #require(before[2])
        try await folder.queue.write { db in
            try db.execute(sql: "UPDATE issues SET project_id = ? WHERE id = ?", arguments: [elsewhere.storageText, moved.id.storageText])
        }
        var edited = try #require(before[3])
        edited.title = "Edited"
        try await store.save(edited)
        try await store.save(Issue(
            sync: SyncMetadata(createdAt: Date(timeIntervalSince1970: 1_000)), projectID: project, title: "Newest"))

        // Each record stays at its position; the deleted and the moved one leave a gap.
        let after = try list.fetch(0..<10)
        #expect(after.map { $0?.id } == before.enumerated().map { $0.offset == 1 || $0.offset == 2 ? nil : $0.element?.id })
        #expect(after[3]?.title == "Edited")
        #expect(!after.contains { $0?.title == "Newest" })

        let fresh = try store.list(Issue.self, where: "projectID", equals: .uuid(project))
        #expect(fresh.count == 299)
        #expect(try fresh.fetch(0..<1).first??.title == "Newest")
        #expect(try fresh.fetch(0..<fresh.count) == store.fetchAll(Issue.self, where: "projectID", equals: .uuid(project)).map(Optional.some))
    }

    @Test func anEntityWithoutAListIndexIsListedTheSameWay() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        for index in 0..<25 {
            try await store.save(Asset(projectID: index % 2 == 0 ? project : elsewhere, name: "Asset \(index)", qrCode: "QR-\(index)"))
        }
        let list = try store.list(Asset.self, where: "projectID", equals: .uuid(project))
        #expect(list.count == 13)
        #expect(try list.fetch(0..<13) == store.fetchAll(Asset.self, where: "projectID", equals: .uuid(project)).map(Optional.some))
        #expect(try list.fetch(4..<4).isEmpty)
        #expect(try store.list(Asset.self, where: "projectID", equals: .uuid(UUID())).count == 0)
    }
}
