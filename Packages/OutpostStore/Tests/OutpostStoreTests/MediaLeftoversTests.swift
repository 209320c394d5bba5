@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// A crash at any point of an attach or a pre-sync download: files and rows end consistent once the
/// leftovers are collected, and nothing a live process is writing is touched.
@Suite(.fieldService) struct MediaLeftoversTests {
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    func photo(of issue: UUID) -> MediaAttachment {
        MediaAttachment(issueID: issue, kind: .photo, fileName: "leak.jpg", contentType: "image/jpeg", byteSize: 0, sha256: "", capturedAt: now)
    }

    /// The pid of a process that has exited.
    func goneProcess() async throws -> Int32 {
        // Not Foundation's Process: see SpawnedProgram.
        try await SpawnedProgram.run("/bin/true", arguments: []).processIdentifier
    }

    /// Only a record of a media entity carries a file: any other is refused before a byte is copied.
    @Test func aRecordThatIsNotMediaTakesNoFile() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let source = folder.directory.appendingPathComponent("photo.jpg")
        try Data(repeating: 3, count: 100).write(to: source)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let error = await #expect(throws: StoreError.self) { try await store.attach(issue, originalAt: source, now: now) }
        #expect(error?.code == .invalidRecord && error?.message.contains("not a media entity") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: store.mediaFolder.appendingPathComponent(issue.id.storageText).path))
        #expect(try store.pendingMediaUploads().isEmpty)
    }

    @Test func aFileWhoseRecordNeverCommittedIsCollected() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        try FileManager.default.createDirectory(at: store.mediaFolder, withIntermediateDirectories: true)
        // An attach moved its copy into place and the process died before the record committed.
        let orphan = store.mediaFolder.appendingPathComponent(UUID().storageText)
        try Data(repeating: 7, count: 500).write(to: orphan)
        // And one that died while copying, under its own pid; this process's copy in progress stays.
        let gone = try await goneProcess()
        let deadCopy = store.mediaFolder.appendingPathComponent("\(UUID().storageText).\(gone).partial")
        let liveCopy = store.mediaFolder.appendingPathComponent("\(UUID().storageText).\(getpid()).partial")
        try Data([1]).write(to: deadCopy)
        try Data([1]).write(to: liveCopy)
        // A pre-sync download of a process that is gone, and one of this process.
        let deadDownload = store.scratchFolder.appendingPathComponent("\(gone)-\(UUID().uuidString.lowercased()).json")
        let liveDownload = try store.scratchFile(pathExtension: "json")
        try Data([1]).write(to: deadDownload)
        try Data([1]).write(to: liveDownload)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let source = folder.directory.appendingPathComponent("leak.jpg")
        try Data(repeating: 1, count: 1_000).write(to: source)
        let attached = try await store.attach(photo(of: issue.id), originalAt: source, now: now)

        #expect(try store.collectMediaLeftovers() == 3)
        for removed in [orphan, deadCopy, deadDownload] { #expect(!FileManager.default.fileExists(atPath: removed.path)) }
        for kept in [liveCopy, liveDownload, store.mediaFolder.appendingPathComponent(attached.id.storageText)] {
            #expect(FileManager.default.fileExists(atPath: kept.path))
        }
    }

    @Test func aReattachThatDiedBeforeItsRecordCommittedGetsThePreviousOriginalBack() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let source = folder.directory.appendingPathComponent("leak.jpg")
        try Data(repeating: 1, count: 1_000).write(to: source)
        let attached = try await store.attach(photo(of: issue.id), originalAt: source, now: now)
        let current = store.mediaFolder.appendingPathComponent(attached.id.storageText)
        // The second attach moved the first original aside and the new one into place, then died.
        try FileManager.default.moveItem(at: current, to: current.appendingPathExtension("previous"))
        try Data(repeating: 2, count: 2_000).write(to: current)
        #expect(try store.collectMediaLeftovers() == 1)
        #expect(try Data(contentsOf: current) == Data(repeating: 1, count: 1_000), "the record still names the first")
        #expect(!FileManager.default.fileExists(atPath: current.appendingPathExtension("previous").path))
        // Died after moving the first aside, before the new one was in place.
        try FileManager.default.moveItem(at: current, to: current.appendingPathExtension("previous"))
        #expect(try store.collectMediaLeftovers() == 1)
        #expect(try Data(contentsOf: current) == Data(repeating: 1, count: 1_000))
    }

    @Test func aReattachThatDiedAfterItsRecordCommittedKeepsTheNewOriginal() async throws {
        let folder = try TemporaryDatabase()
        let store = try LocalStore.open(at: folder.path)
        let issue = try await store.save(Issue(projectID: UUID(), title: "Leak"), now: now)
        let first = folder.directory.appendingPathComponent("first.jpg"), second = folder.directory.appendingPathComponent("second.jpg")
        try Data(repeating: 1, count: 1_000).write(to: first)
        try Data(repeating: 2, count: 2_000).write(to: second)
        let attached = try await store.attach(photo(of: issue.id), originalAt: first, now: now)
        _ = try await store.attach(attached, originalAt: second, now: now)
        let current = store.mediaFolder.appendingPathComponent(attached.id.storageText)
        // The process died between the commit and removing the first original.
        try Data(repeating: 1, count: 1_000).write(to: current.appendingPathExtension("previous"))
        #expect(try store.collectMediaLeftovers() == 1)
        #expect(try Data(contentsOf: current) == Data(repeating: 2, count: 2_000))
        #expect(!FileManager.default.fileExists(atPath: current.appendingPathExtension("previous").path))
    }
}
