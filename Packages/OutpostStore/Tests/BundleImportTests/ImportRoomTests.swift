@testable import OutpostStore
import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing
import ZIPFoundation

/// An import takes no more of the volume than the room the store keeps free allows, however large its
/// records: checked every few megabytes of records, not only every 1,024 of them (attack 69, finding
/// 1: an import of 600 records of three 1 MB values each wrote 3.8 GB into a volume with 1 GB free).
///
/// On a simulated volume: the real one's free space moved with every other test's files, and in CI the
/// end of an import found room the test had not left it (make test at b0579ce). Serialized, so that
/// neither test's staging files count on the other's volume.
@Suite(.fieldService, .serialized) struct ImportRoomTests {
    /// A JSON bundle of `count` issues of project `project`, each with two values of 1,000,000 bytes.
    static func largeIssues(_ count: Int, of project: UUID, at url: URL) throws {
        try issues(count, value: String(repeating: "w", count: 1_000_000), of: project, at: url)
    }

    /// A JSON bundle of project `project` and `count` of its issues, each with `value` as its title and details.
    static func issues(_ count: Int, value: String, of project: UUID, at url: URL) throws {
        #expect(FileManager.default.createFile(atPath: url.path, contents: nil))
        let file = try FileHandle(forWritingTo: url)
        defer { try? file.close() }
        let project = project.uuidString.lowercased()
        try file.write(contentsOf: Data("""
            {"format": "outpost-bundle", "formatVersion": 2, "projectID": "\(project)", "records": [
            {"entity": "project", "id": "\(project)", "version": 1, "createdAt": "2026-12-01T20:00:00.000Z", \
            "updatedAt": "2026-12-01T20:00:00.000Z", "fields": {"name": "Large", "address": "1 Main Street", "status": "active"}}
            """.utf8))
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

    /// A volume of `room` bytes beyond `keptFree`, besides what the workspace's folder holds now, that
    /// holds only what this test writes: the files in the workspace's folder and SQLite's temporary files
    /// open in this process (where an import stages its records), found by their descriptors since
    /// SQLite deletes each as soon as it is open.
    static func volume(of workspace: Workspace, room: Int64, keptFree: Int64) -> StoreVolume {
        let folder = workspace.folder
        let capacity = keptFree + room + bytesWritten(in: folder)
        return StoreVolume { _ in capacity - bytesWritten(in: folder) }
    }

    static func bytesWritten(in folder: URL) -> Int64 {
        var bytes: Int64 = 0
        func size(_ path: String) -> Int64 {
            var info = stat()
            return stat(path, &info) == 0 ? Int64(info.st_size) : 0
        }
        for case let name as String in FileManager.default.enumerator(atPath: folder.path) ?? NSEnumerator() {
            bytes += size(folder.appendingPathComponent(name).path)
        }
        for descriptor in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            let link = "/proc/self/fd/\(descriptor)"
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link), target.contains("etilqs_") {
                bytes += size(link)
            }
        }
        return bytes
    }

    /// Imports `url` into `store`, expecting `limitExceeded` for want of room and nothing written; the
    /// refusal's message.
    @discardableResult
    static func expectRefusedForRoom(importing url: URL, into store: LocalStore, in workspace: Workspace) throws -> String {
        let before = try workspace.snapshot()
        let error = #expect(throws: BundleError.self) { try store.importBundle(at: url) }
        #expect(error?.code == .limitExceeded)
        #expect((error?.underlying as? StoreError)?.code == .storageFull)
        // Says what waits for the room: the import, not a pull that is not running.
        #expect(error?.message.contains("imports wait until space is freed") == true, "\(error?.message ?? "")")
        #expect(try workspace.snapshot() == before, "nothing was imported")
        return error?.message ?? ""
    }

    @Test func anImportOfLargeRecordsStopsOnceItReachesTheRoomKeptFree() throws {
        let workspace = try Workspace()
        let project = UUID()
        let url = workspace.url("large.json")
        try Self.largeIssues(48, of: project, at: url)
        // 48 MB of room above what the store keeps free; the import writes 96 MB of values, staged and
        // then written through the WAL. It is stopped while it stages, not only by the room its end asks.
        let keptFree: Int64 = 1 << 30
        let store = try LocalStore.open(
            at: workspace.databasePath, app: .fieldService, keepingFree: keptFree,
            volume: Self.volume(of: workspace, room: 48 << 20, keptFree: keptFree))
        let message = try Self.expectRefusedForRoom(importing: url, into: store, in: workspace)
        #expect(!message.contains("this step writes"), "stopped while staging: \(message)")
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
        let keptFree: Int64 = 1 << 30
        let store = try LocalStore.open(
            at: workspace.databasePath, app: .fieldService, keepingFree: keptFree,
            volume: Self.volume(of: workspace, room: 64 << 20, keptFree: keptFree))
        let message = try Self.expectRefusedForRoom(importing: url, into: store, in: workspace)
        #expect(message.contains("this step writes"), "stopped by the room the end asks for: \(message)")
        // With room for it, the same bundle imports whole.
        let roomy = try LocalStore.open(at: workspace.databasePath, keepingFree: 0)
        #expect(try roomy.importBundle(at: url).total.inserted == 26)
    }

    /// A zip's manifest is copied out before it is read; the copy is a write like any other. Copied into
    /// the system's temporary folder before any check, a 6.5 MB zip's 1 GB manifest filled the device's
    /// volume, and stayed there (attack 74, finding 1). Room for its declared size is asked first, and a
    /// refused import leaves nothing on the volume.
    @Test func aZipsManifestIsCopiedOnlyWithRoomForIt() throws {
        let workspace = try Workspace()
        let project = UUID()
        let json = workspace.url("large.json")
        // Values of hex digits, which deflate about two to one: within the zip's limit on expansion.
        let value = String((0..<30_000).map { _ in UUID().uuidString.lowercased().filter(\.isHexDigit) }.joined().prefix(900_000))
        try Self.issues(20, value: value, of: project, at: json)
        let url = workspace.url("large.zip")
        let archive = try Archive(url: url, accessMode: .create)
        try archive.addEntry(with: "bundle.json", fileURL: json, compressionMethod: .deflate)
        try FileManager.default.removeItem(at: json)
        let keptFree: Int64 = 1 << 30
        let store = try LocalStore.open(
            at: workspace.databasePath, app: .fieldService, keepingFree: keptFree,
            volume: Self.volume(of: workspace, room: 8 << 20, keptFree: keptFree))
        let written = Self.bytesWritten(in: workspace.folder)
        let message = try Self.expectRefusedForRoom(importing: url, into: store, in: workspace)
        #expect(message.contains("and the 34 MB this step writes"), "refused for the manifest's copy: \(message)")
        #expect(Self.bytesWritten(in: workspace.folder) <= written + (1 << 20), "the copy was not made")
        let roomy = try LocalStore.open(at: workspace.databasePath, app: .fieldService, keepingFree: 0, volume: .system)
        #expect(try roomy.importBundle(at: url).total.inserted == 21)
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.databasePath + ".files").isEmpty, "no copy stays")
    }

    /// The copy of an import killed mid-way (the app stopped by the system) stayed for good in the
    /// system's temporary folder (attack 74, finding 2). It is made beside the store's files now, and an
    /// import removes such copies once they are an hour old; a running import's is younger.
    @Test func aCopyAKilledImportLeftIsRemovedByALaterOne() throws {
        let workspace = try Workspace()
        let files = URL(fileURLWithPath: workspace.databasePath + ".files")
        let old = files.appendingPathComponent(".incoming-\(UUID().uuidString.lowercased())")
        let running = files.appendingPathComponent(".incoming-\(UUID().uuidString.lowercased())")
        for folder in [old, running] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(repeating: 0x20, count: 4096).write(to: folder.appendingPathComponent("bundle.json"))
        }
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-7200)], ofItemAtPath: old.path)
        let url = workspace.url("small.json")
        try Self.issues(2, value: "Leak", of: UUID(), at: url)
        #expect(try LocalStore.open(at: workspace.databasePath, keepingFree: 0).importBundle(at: url).total.inserted == 3)
        #expect(!FileManager.default.fileExists(atPath: old.path))
        #expect(FileManager.default.fileExists(atPath: running.path))
    }

    /// A running import holds a lock in its copy's folder; the copy of an import killed a minute ago,
    /// whose lock no one holds, goes at the next import, not an hour later. Killed again and again
    /// during a zip's import, the app left a folder a kill, 166 MB from a 0.5 MB bundle in 25 kills
    /// (attack 102, F1). A folder not locked yet (being made) is still judged by its age.
    @Test func aCopyWhoseImportIsGoneIsRemovedAtOnce() throws {
        let workspace = try Workspace()
        let files = URL(fileURLWithPath: workspace.databasePath + ".files")
        func folder(lock: Bool) throws -> URL {
            let folder = files.appendingPathComponent(".incoming-\(UUID().uuidString.lowercased())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(repeating: 0x20, count: 4096).write(to: folder.appendingPathComponent("bundle.json"))
            if lock { try Data().write(to: folder.appendingPathComponent(".lock")) }
            return folder
        }
        let abandoned = try folder(lock: true), running = try folder(lock: true), making = try folder(lock: false)
        // Another process's running import: its lock, held on a descriptor of its own.
        let held = open(running.appendingPathComponent(".lock").path, O_RDWR)
        #expect(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0)
        defer { close(held) }
        let url = workspace.url("small.json")
        try Self.issues(2, value: "Leak", of: UUID(), at: url)
        #expect(try LocalStore.open(at: workspace.databasePath, keepingFree: 0).importBundle(at: url).total.inserted == 3)
        #expect(!FileManager.default.fileExists(atPath: abandoned.path), "no one holds its lock")
        #expect(FileManager.default.fileExists(atPath: running.path), "its import holds its lock")
        #expect(FileManager.default.fileExists(atPath: making.path), "a minute old, not locked yet")
    }
}
