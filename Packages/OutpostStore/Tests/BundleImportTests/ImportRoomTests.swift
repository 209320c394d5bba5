@testable import OutpostStore
import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// An import takes no more of the volume than the room the store keeps free allows, however large its
/// records: checked every few megabytes of records, not only every 1,024 of them (attack 69, finding
/// 1: an import of 600 records of three 1 MB values each wrote 3.8 GB into a volume with 1 GB free).
@Suite(.fieldService) struct ImportRoomTests {
    /// A JSON bundle of `count` issues of project `project`, each with two values of 1,000,000 bytes.
    static func largeIssues(_ count: Int, of project: UUID, at url: URL) throws {
        #expect(FileManager.default.createFile(atPath: url.path, contents: nil))
        let file = try FileHandle(forWritingTo: url)
        defer { try? file.close() }
        let project = project.uuidString.lowercased()
        try file.write(contentsOf: Data("""
            {"format": "outpost-bundle", "formatVersion": 2, "projectID": "\(project)", "records": [
            {"entity": "project", "id": "\(project)", "version": 1, "createdAt": "2026-12-01T20:00:00.000Z", \
            "updatedAt": "2026-12-01T20:00:00.000Z", "fields": {"name": "Large", "address": "1 Main Street", "status": "active"}}
            """.utf8))
        let value = String(repeating: "w", count: 1_000_000)
        for _ in 0..<count {
            try file.write(contentsOf: Data("""
                ,
                {"entity": "issue", "id": "\(UUID().uuidString.lowercased())", "version": 1, \
                "createdAt": "2026-12-01T20:00:00.000Z", "updatedAt": "2026-12-01T20:00:00.000Z", "fields": {"projectID": \
                "\(project)", "title": "\(value)", "details": "\(value)", "status": "open", "priority": "low"}}
                """.utf8))
        }
        try file.write(contentsOf: Data("\n]}\n".utf8))
    }

    static func freeBytes(at path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfFileSystem(forPath: (path as NSString).deletingLastPathComponent)
        return try #require((attributes[.systemFreeSize] as? NSNumber)?.int64Value)
    }

    /// Imports `url` into `store`, expecting `limitExceeded` for want of room and nothing written.
    static func expectRefusedForRoom(importing url: URL, into store: LocalStore, in workspace: Workspace) throws {
        let before = try workspace.snapshot()
        #expect {
            try store.importBundle(at: url)
        } throws: { error in
            guard let error = error as? BundleError, error.code == .limitExceeded else { return false }
            return (error.underlying as? StoreError)?.code == .storageFull
        }
        #expect(try workspace.snapshot() == before, "nothing was imported")
    }

    @Test func anImportOfLargeRecordsStopsOnceItReachesTheRoomKeptFree() throws {
        let workspace = try Workspace()
        let project = UUID()
        let url = workspace.url("large.json")
        try Self.largeIssues(48, of: project, at: url)
        // 48 MB of room above what the store keeps free; the import writes 96 MB of values, staged and
        // then written through the WAL.
        let keptFree = try Self.freeBytes(at: workspace.databasePath) - (48 << 20)
        let store = try LocalStore.open(at: workspace.databasePath, keepingFree: keptFree)
        try Self.expectRefusedForRoom(importing: url, into: store, in: workspace)
    }

    /// The end of an import moves its staged records into their tables, twice their bytes through the
    /// WAL and into the file, in statements no check can come between: room for that is asked for
    /// first. 50 MB of records with 64 MB of room above what the store keeps free staged without
    /// passing it, then ran past it at the end (attack 70).
    @Test func anImportAsksForRoomForItsEndBeforeIt() throws {
        let workspace = try Workspace()
        let project = UUID()
        let url = workspace.url("large.json")
        try Self.largeIssues(25, of: project, at: url)
        let keptFree = try Self.freeBytes(at: workspace.databasePath) - (64 << 20)
        let store = try LocalStore.open(at: workspace.databasePath, keepingFree: keptFree)
        try Self.expectRefusedForRoom(importing: url, into: store, in: workspace)
        // With room for it, the same bundle imports whole.
        let roomy = try LocalStore.open(at: workspace.databasePath, keepingFree: 0)
        #expect(try roomy.importBundle(at: url).total.inserted == 26)
    }
}
