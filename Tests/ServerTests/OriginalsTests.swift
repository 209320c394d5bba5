@testable import OutpostServer
import Foundation
import GRDB
import Outpost
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import Testing

/// A teammate's device gets the original photo: `GET /media/{id}` and `Device.original(of:)`, against
/// the real server on 127.0.0.1.
@Suite("Originals for teammates: downloaded on demand, resumed, checked, cached within a budget", .fieldService)
struct OriginalsTests {
    /// Alice (foreman of project A) photographs an issue and syncs, the file included; returns the
    /// attachment and its bytes.
    static func alicesPhotos(
        _ count: Int, size: Int, on server: TestServer, seed: UInt64 = 1
    ) async throws -> [(attachment: MediaAttachment, bytes: Data)] {
        let alice = try Device(
            path: server.directory.appendingPathComponent("alice-\(UUID().uuidString).sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.aliceToken))
        let issue = try await alice.save(Issue(projectID: TestServer.projectA, title: "Cracked sill"))
        var random = SeededGenerator(seed: seed)
        var photos: [(MediaAttachment, Data)] = []
        for index in 0..<count {
            let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &random) })
            let file = server.directory.appendingPathComponent("IMG_\(index).jpg")
            try bytes.write(to: file)
            photos.append((try await alice.attachPhoto(to: issue, fileAt: file), bytes))
        }
        let report = try await alice.sync(conditions: SyncConditions(mediaRequested: true))
        #expect(report.mediaUploaded == count, "\(report)")
        return photos
    }

    /// A device of Carol's (project manager of A and B) that pulled the attachments.
    static func carolsDevice(
        on server: TestServer, cacheBytes: Int64 = 256 << 20
    ) async throws -> (device: Device, transport: HTTPTransport) {
        let transport = server.transport(token: TestServer.carolToken)
        let device = try Device(
            path: server.directory.appendingPathComponent("carol-\(UUID().uuidString).sqlite").path, app: .fieldService,
            transport: transport, originalsCacheBytes: cacheBytes)
        try await device.sync()
        return (device, transport)
    }

    @Test("A teammate downloads an original once, checked against its record; a second ask reads the cache", arguments: Backend.available)
    func aTeammateDownloadsTheOriginal(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let (attachment, bytes) = try await Self.alicesPhotos(1, size: 100_000, on: server)[0]
        let (carol, transport) = try await Self.carolsDevice(on: server)
        let before = await transport.transferred
        let url = try await carol.original(of: attachment)
        #expect(try Data(contentsOf: url) == bytes)
        let first = await transport.transferred.since(before)
        #expect(first.requests == 1 && first.bytesReceived == Int64(bytes.count), "\(first)")
        #expect(try await carol.original(of: attachment) == url)
        #expect(await transport.transferred.since(before).requests == 1, "the second ask went to the cache")
        #expect(url.path.hasPrefix(carol.store.originalsFolder.path))
        await server.stop()
    }

    @Test("A download cut part way resumes after the bytes it holds; a partial of wrong bytes is refused, removed, and fetched again whole")
    func aCutDownloadResumes() async throws {
        let server = try await TestServer.start(.sqlite)
        let (attachment, bytes) = try await Self.alicesPhotos(1, size: 100_000, on: server)[0]

        // The first 40,000 bytes arrived before the cut.
        let (carol, transport) = try await Self.carolsDevice(on: server)
        let partial = try carol.store.originalFile(of: attachment)
        #expect(!partial.isHeld && partial.url.pathExtension == "partial")
        try bytes.prefix(40_000).write(to: partial.url)
        let before = await transport.transferred
        let url = try await carol.original(of: attachment)
        #expect(try Data(contentsOf: url) == bytes)
        #expect(await transport.transferred.since(before).bytesReceived == 60_000, "only the rest came")
        #expect(!FileManager.default.fileExists(atPath: partial.url.path))

        // Bytes that are not the file's (a disk error, another file's start): the whole is refused.
        let (other, _) = try await Self.carolsDevice(on: server)
        let broken = try other.store.originalFile(of: attachment)
        try Data(repeating: 0x5A, count: 40_000).write(to: broken.url)
        let refused = await #expect(throws: OutpostError.self) { _ = try await other.original(of: attachment) }
        guard case .store(let error)? = refused else { Issue.record("\(String(describing: refused))"); return }
        #expect(error.code == .checksumMismatch, "\(error)")
        #expect(!FileManager.default.fileExists(atPath: broken.url.path))
        #expect(other.store.originalsCacheBytes() == 0, "nothing unchecked is kept")
        #expect(try Data(contentsOf: try await other.original(of: attachment)) == bytes)

        // Another process on the same database downloading it (its lock held here, as that process
        // holds it): this device asks nothing until the lock is free, then finds the file kept.
        let (third, thirdTransport) = try await Self.carolsDevice(on: server)
        let wanted = try third.store.originalFile(of: attachment)
        var elsewhere = try third.store.lockOriginalDownload(wanted)
        #expect(elsewhere != nil, "the lock is free before the other process takes it")
        let asking = await thirdTransport.transferred
        let waiting = Task { try await third.original(of: attachment) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(await thirdTransport.transferred.since(asking).requests == 0, "no request while another process downloads")
        try bytes.write(to: wanted.url)  // what the other process downloaded, kept before it lets go
        _ = try third.store.keepOriginal(wanted, within: 1 << 30)
        #expect(elsewhere != nil)
        elsewhere = nil
        #expect(try Data(contentsOf: try await waiting.value) == bytes)
        #expect(await thirdTransport.transferred.since(asking).requests == 0, "the kept file was found, not fetched again")

        // A link planted where the partial file goes is removed, never written through.
        let (fourth, _) = try await Self.carolsDevice(on: server)
        let outside = server.directory.appendingPathComponent("outside.txt")
        try Data("keep me".utf8).write(to: outside)
        let planted = try fourth.store.originalFile(of: attachment).url
        try FileManager.default.createSymbolicLink(at: planted, withDestinationURL: outside)
        #expect(try Data(contentsOf: try await fourth.original(of: attachment)) == bytes)
        #expect(try Data(contentsOf: outside) == Data("keep me".utf8))
        await server.stop()
    }

    @Test("A non-member, a deleted attachment and an unfinished upload get 404 as for an id that does not exist; a server's file that is not the record's is refused", arguments: Backend.available)
    func refusals(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        let photos = try await Self.alicesPhotos(2, size: 10_000, on: server)
        let folder = server.directory.appendingPathComponent("downloads-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        func download(_ id: UUID, as token: String) async throws -> TransportError? {
            let partial = folder.appendingPathComponent(UUID().uuidString)
            do {
                _ = try await server.transport(token: token).downloadOriginal(of: id, byteCount: 10_000, appendingTo: partial)
                return nil
            } catch {
                #expect(((try? Data(contentsOf: partial)) ?? Data()).isEmpty, "a refusal writes nothing")
                return error
            }
        }
        // Bob reaches project B only.
        let bobs = try #require(try await download(photos[0].attachment.id, as: TestServer.bobToken))
        let nobodys = try #require(try await download(UUID(), as: TestServer.bobToken))
        #expect(bobs.status == 404 && nobodys.status == 404, "\(bobs) \(nobodys)")
        #expect(bobs.serverCode == .notFound && nobodys.serverCode == .notFound)
        #expect(try await download(photos[0].attachment.id, as: TestServer.carolToken) == nil)

        // An attachment whose file never came.
        let alice = try Device(
            path: server.directory.appendingPathComponent("alice-2.sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.aliceToken))
        let issue = try await alice.save(Issue(projectID: TestServer.projectA, title: "Loose rail"))
        let file = server.directory.appendingPathComponent("rail.jpg")
        try Data(repeating: 7, count: 10_000).write(to: file)
        let waiting = try await alice.attachPhoto(to: issue, fileAt: file)
        try await alice.sync(conditions: SyncConditions(isMetered: true))  // the record only: media waits
        #expect(try await download(waiting.id, as: TestServer.carolToken)?.status == 404)

        // The server's file is not the one the record names (changed under the server): the device
        // refuses it and keeps nothing.
        let tampered = photos[1]
        try Data(repeating: 0, count: 10_000).write(to: server.server.mediaFiles(of: tampered.attachment.id).finished)
        let (carol, _) = try await Self.carolsDevice(on: server)
        let refused = await #expect(throws: OutpostError.self) { _ = try await carol.original(of: tampered.attachment) }
        guard case .store(let error)? = refused else { Issue.record("\(String(describing: refused))"); return }
        #expect(error.code == .checksumMismatch)
        #expect(carol.store.originalsCacheBytes() == 0)
        // Asked for the whole project, the file whose bytes are wrong is told apart from those the
        // server cannot give yet: `outpost originals --project` exited 0 with nothing said (attack 101, F5).
        let project = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(project.refused == 1, "\(project)")
        #expect(project.unavailable == 1, "the unfinished upload: \(project)")
        #expect(project.downloaded == 1, "\(project)")
        #expect(carol.store.originalsCacheBytes() == 10_000)

        // Deleted by the office: its original is no one's any more, on the server or in a teammate's cache.
        let cached = try await carol.original(of: photos[0].attachment)
        let fresh = try Device(
            path: server.directory.appendingPathComponent("alice-3.sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.aliceToken))
        try await fresh.sync()
        let held = try #require(try fresh.fetch(MediaAttachment.self, id: photos[0].attachment.id))
        try await fresh.delete(held)
        try await fresh.sync()
        #expect(try await download(photos[0].attachment.id, as: TestServer.carolToken)?.status == 404)
        #expect(FileManager.default.fileExists(atPath: cached.path))
        try await carol.sync()
        #expect(!FileManager.default.fileExists(atPath: cached.path), "the pulled delete took the cached original")
        await server.stop()
    }

    @Test("A pre-sync brings the project's originals when the app asks, as many as the cache budget holds")
    func aPreSyncBringsTheOriginals() async throws {
        let server = try await TestServer.start(.sqlite)
        // First, an attachment whose file never came: the server cannot give it, and the others still come.
        let waiting = try Device(
            path: server.directory.appendingPathComponent("alice-waiting.sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.aliceToken))
        let issue = try await waiting.save(Issue(projectID: TestServer.projectA, title: "Loose rail"))
        let rail = server.directory.appendingPathComponent("rail.jpg")
        try Data(repeating: 7, count: 10_000).write(to: rail)
        try await waiting.attachPhoto(to: issue, fileAt: rail)
        try await waiting.sync(conditions: SyncConditions(isMetered: true))
        let photos = try await Self.alicesPhotos(3, size: 100_000, on: server)
        let transport = server.transport(token: TestServer.carolToken)
        let carol = try Device(
            path: server.directory.appendingPathComponent("carol-presync.sqlite").path, app: .fieldService,
            transport: transport, originalsCacheBytes: 250_000)
        try await carol.preSync(project: TestServer.projectA)
        let first = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(first == OriginalsSummary(downloaded: 2, alreadyHeld: 0, leftOverBudget: 1, unavailable: 1, bytesReceived: 200_000), "\(first)")
        let again = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(again == OriginalsSummary(downloaded: 0, alreadyHeld: 2, leftOverBudget: 1, unavailable: 1, bytesReceived: 0), "\(again)")
        var held = 0
        for photo in photos {
            let file = try carol.store.originalFile(of: photo.attachment)
            if file.isHeld {
                held += 1
                #expect(try Data(contentsOf: file.url) == photo.bytes)
            }
        }
        #expect(held == 2)
        // A record whose digest is not one (an app whose schema checks no digest, a file edited under
        // the store) never becomes a file name.
        let edited = photos[2].attachment
        try await DatabaseQueue(path: carol.store.path).write { db in
            try db.execute(sql: "UPDATE media_attachments SET sha256 = '../../../escape' WHERE id = ?", arguments: [edited.id.uuidString.lowercased()])
        }
        let named = #expect(throws: StoreError.self) { _ = try carol.store.originalFile(of: edited) }
        #expect(named?.code == .mediaNotFound)
        // A project this device does not hold is refused.
        let refused = await #expect(throws: OutpostError.self) { _ = try await carol.downloadOriginals(ofProject: UUID()) }
        guard case .store(let error)? = refused else { Issue.record("\(String(describing: refused))"); return }
        #expect(error.code == .mediaNotFound)
        await server.stop()
    }

    @Test("A project's originals in the cache are its newest that fit the budget: a teammate's new photo displaces the oldest, a run changes nothing when nothing changed, a lowered budget is kept, and no lock file stays")
    func aProjectsOriginalsKeepTheNewest() async throws {
        let server = try await TestServer.start(.sqlite)
        let photos = try await Self.alicesPhotos(3, size: 100_000, on: server)
        let (carol, transport) = try await Self.carolsDevice(on: server, cacheBytes: 250_000)
        let first = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(first == OriginalsSummary(downloaded: 2, leftOverBudget: 1, bytesReceived: 200_000), "\(first)")
        let newest = try await Self.alicesPhotos(1, size: 100_000, on: server, seed: 2)[0]
        try await carol.sync()
        // The cache was full of the project's older photos: the newest displaces the oldest it held
        // (every run left it "over the budget" before; attack 125, F4).
        let second = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(second == OriginalsSummary(downloaded: 1, alreadyHeld: 1, leftOverBudget: 2, bytesReceived: 100_000), "\(second)")
        #expect(try carol.store.originalFile(of: newest.attachment).isHeld)
        #expect(carol.store.originalsCacheBytes() == 200_000)
        // Nothing new: nothing comes, nothing goes (no run evicts one file for another it evicts next).
        let before = await transport.transferred
        let third = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(third == OriginalsSummary(alreadyHeld: 2, leftOverBudget: 2), "\(third)")
        #expect(await transport.transferred.since(before).requests == 0)
        #expect(photos.filter { (try? carol.store.originalFile(of: $0.attachment).isHeld) == true }.count == 1)

        // The app lowers its budget: the next sync, or any originals call, brings the cache under it,
        // the least recently used going first.
        _ = try await carol.original(of: newest.attachment)
        let lowered = try Device(
            path: carol.store.path, app: .fieldService, transport: server.transport(token: TestServer.carolToken),
            originalsCacheBytes: 150_000)
        try await lowered.sync()
        #expect(lowered.store.originalsCacheBytes() <= 150_000, "\(lowered.store.originalsCacheBytes())")
        #expect(try lowered.store.originalFile(of: newest.attachment).isHeld, "the one used last stays")
        let tighter = try Device(
            path: carol.store.path, app: .fieldService, transport: server.transport(token: TestServer.carolToken),
            originalsCacheBytes: 50_000)
        _ = try await tighter.downloadOriginals(ofProject: TestServer.projectA)
        #expect(tighter.store.originalsCacheBytes() == 0)

        // Each download took a lock file beside its original; none is left once the downloads end.
        let left = try FileManager.default.contentsOfDirectory(atPath: carol.store.originalsFolder.path)
        #expect(left.allSatisfy { !$0.hasSuffix(".lock") }, "\(left)")
        await server.stop()
    }

    @Test("Seeded: after each run the cache holds exactly the project's newest originals that fit the budget, as photos arrive and the budget changes; a run after it asks the server nothing", arguments: [1, 2, 3] as [UInt64])
    func theCacheFollowsItsModel(seed: UInt64) async throws {
        let server = try await TestServer.start(.sqlite)
        let alice = try Device(
            path: server.directory.appendingPathComponent("alice.sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.aliceToken))
        let issue = try await alice.save(Issue(projectID: TestServer.projectA, title: "Cracked sill"))
        var random = SeededGenerator(seed: seed)
        var photos: [(attachment: MediaAttachment, size: Int64)] = []  // oldest first
        var budget: Int64 = 250_000
        let path = server.directory.appendingPathComponent("carol.sqlite").path
        func carolsDevice() throws -> (Device, HTTPTransport) {
            let transport = server.transport(token: TestServer.carolToken)
            return (try Device(path: path, app: .fieldService, transport: transport, originalsCacheBytes: budget), transport)
        }
        var (carol, transport) = try carolsDevice()
        for step in 0..<8 {
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                let size = Int.random(in: 10_000...120_000, using: &random)
                let file = server.directory.appendingPathComponent("IMG_\(photos.count).jpg")
                try Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }).write(to: file)
                try await Task.sleep(for: .milliseconds(5))  // each photo taken at its own millisecond
                photos.append((try await alice.attachPhoto(to: issue, fileAt: file), Int64(size)))
            }
            try await alice.sync(conditions: SyncConditions(mediaRequested: true))
            if Int.random(in: 0..<4, using: &random) == 0 {
                budget = Int64.random(in: 50_000...400_000, using: &random)
                (carol, transport) = try carolsDevice()
            }
            try await carol.sync()
            _ = try await carol.downloadOriginals(ofProject: TestServer.projectA)
            // The model: newest first, each one that still fits.
            var taken: Int64 = 0
            var expected: Set<UUID> = []
            for photo in photos.reversed() where taken + photo.size <= budget {
                taken += photo.size
                expected.insert(photo.attachment.id)
            }
            let held = Set(try photos.filter { try carol.store.originalFile(of: $0.attachment).isHeld }.map(\.attachment.id))
            #expect(held == expected, "seed \(seed), step \(step), budget \(budget)")
            #expect(carol.store.originalsCacheBytes() == taken, "seed \(seed), step \(step)")
            let before = await transport.transferred
            let again = try await carol.downloadOriginals(ofProject: TestServer.projectA)
            #expect(again.downloaded == 0 && again.alreadyHeld == expected.count, "\(again)")
            #expect(await transport.transferred.since(before).requests == 0, "seed \(seed), step \(step)")
        }
        await server.stop()
    }

    @Test("A partial download counts against the budget and goes like any original once no download holds it; one a download holds stays (attack 126, F2)")
    func partialDownloadsStayWithinTheBudget() async throws {
        let server = try await TestServer.start(.sqlite)
        let photos = try await Self.alicesPhotos(3, size: 100_000, on: server)
        let (carol, _) = try await Self.carolsDevice(on: server, cacheBytes: 250_000)
        // Cut downloads of every photo: 90 KB each, just written.
        var partials: [OriginalFile] = []
        for photo in photos {
            let partial = try carol.store.originalFile(of: photo.attachment)
            try photo.bytes.prefix(90_000).write(to: partial.url)
            partials.append(partial)
        }
        // Another process is downloading the one the budget leaves out (the last in the store's order,
        // newest first): its partial is not to be touched.
        let last = try #require(try carol.store.originalFiles(ofProject: TestServer.projectA).last)
        let oldest = try #require(partials.first { $0.attachmentID == last.attachmentID })
        var elsewhere = try carol.store.lockOriginalDownload(oldest)
        #expect(elsewhere != nil)
        let summary = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(summary.downloaded == 2, "\(summary)")
        #expect(FileManager.default.fileExists(atPath: oldest.url.path), "the held partial stays")
        #expect(carol.store.originalsCacheBytes() == 290_000, "\(carol.store.originalsCacheBytes())")
        // Let go (the process was killed mid-download): the next sync keeps the budget with the partial,
        // which was used least recently, not with a whole original (one just written was spared, and a
        // newest original went in its place).
        #expect(elsewhere != nil)
        elsewhere = nil
        try await carol.sync()
        #expect(!FileManager.default.fileExists(atPath: oldest.url.path))
        #expect(carol.store.originalsCacheBytes() == 200_000, "\(carol.store.originalsCacheBytes())")
        let left = try FileManager.default.contentsOfDirectory(atPath: carol.store.originalsFolder.path)
        #expect(left.allSatisfy { !$0.hasSuffix(".lock") }, "\(left)")
        await server.stop()
    }

    @Test("Asked for a project's originals, a server's answer that is broken (no digest, a body past its size) is a refusal, told apart from an upload not finished")
    func aBrokenAnswerIsARefusal() async throws {
        let server = try await TestServer.start(.sqlite)
        let photos = try await Self.alicesPhotos(2, size: 10_000, on: server)
        let broken = BrokenOriginal(base: server.transport(token: TestServer.carolToken), attachment: photos[1].attachment.id)
        let carol = try Device(
            path: server.directory.appendingPathComponent("carol-broken.sqlite").path, app: .fieldService,
            transport: broken)
        try await carol.sync()
        let summary = try await carol.downloadOriginals(ofProject: TestServer.projectA)
        #expect(summary == OriginalsSummary(downloaded: 1, refused: 1, bytesReceived: 10_000), "\(summary)")
        await server.stop()
    }

    @Test("Downloads stay within the cache budget, least recently used first; the device's own originals are never evicted")
    func theCacheKeepsItsBudget() async throws {
        let server = try await TestServer.start(.sqlite)
        let photos = try await Self.alicesPhotos(3, size: 100_000, on: server)
        let (carol, transport) = try await Self.carolsDevice(on: server, cacheBytes: 250_000)
        let first = try await carol.original(of: photos[0].attachment)
        let second = try await carol.original(of: photos[1].attachment)
        _ = try await carol.original(of: photos[0].attachment)  // used again: the second is now the oldest
        let third = try await carol.original(of: photos[2].attachment)
        #expect(FileManager.default.fileExists(atPath: first.path))
        #expect(!FileManager.default.fileExists(atPath: second.path))
        #expect(FileManager.default.fileExists(atPath: third.path))
        #expect(carol.store.originalsCacheBytes() == 200_000)
        let before = await transport.transferred
        #expect(try Data(contentsOf: try await carol.original(of: photos[1].attachment)) == photos[1].bytes)
        #expect(await transport.transferred.since(before).bytesReceived == 100_000, "an evicted one comes again")

        // A budget of one and a half files: each download evicts the one before, and never the device's
        // own photo (not yet uploaded) nor a file the cache did not write; an original larger than the
        // whole budget is refused before a byte comes.
        let small = try Device(
            path: server.directory.appendingPathComponent("carol-small.sqlite").path, app: .fieldService,
            transport: server.transport(token: TestServer.carolToken), originalsCacheBytes: 150_000)
        try await small.sync()
        let issue = try #require(try small.records(Issue.self, where: "projectID", is: .uuid(TestServer.projectA)).first)
        let file = server.directory.appendingPathComponent("own.jpg")
        try Data(repeating: 3, count: 200_000).write(to: file)
        let own = try await small.attachPhoto(to: issue, fileAt: file)
        let ownURL = try await small.original(of: own)
        #expect(ownURL.path.hasPrefix(small.store.mediaFolder.path))
        try FileManager.default.createDirectory(at: small.store.originalsFolder, withIntermediateDirectories: true)
        let stranger = small.store.originalsFolder.appendingPathComponent("notes.txt")
        try Data(repeating: 1, count: 500_000).write(to: stranger)
        let downloaded = try await small.original(of: photos[0].attachment)
        let alsoDownloaded = try await small.original(of: photos[1].attachment)
        #expect(!FileManager.default.fileExists(atPath: downloaded.path), "over the budget, the older download went")
        #expect(FileManager.default.fileExists(atPath: alsoDownloaded.path))
        #expect(FileManager.default.fileExists(atPath: stranger.path), "eviction removes only the cache's own files")
        #expect(try Data(contentsOf: ownURL) == Data(repeating: 3, count: 200_000))
        #expect(try await small.status().pendingMediaUploads == 1)

        let tiny = try Device(
            path: server.directory.appendingPathComponent("carol-tiny.sqlite").path, app: .fieldService,
            transport: transport, originalsCacheBytes: 99_999)
        try await tiny.sync()
        let asked = await transport.transferred
        let refused = await #expect(throws: OutpostError.self) { _ = try await tiny.original(of: photos[2].attachment) }
        guard case .store(let error)? = refused else { Issue.record("\(String(describing: refused))"); return }
        #expect(error.code == .overBudget, "\(error)")
        #expect(await transport.transferred.since(asked).requests == 0, "refused before asking the server")
        await server.stop()
    }
}

/// A server whose answer for one original is broken (names no digest of the whole file), as a proxy
/// that strips headers answers; every other call reaches the real server.
struct BrokenOriginal: ForwardingTransport {
    let base: HTTPTransport
    let attachment: UUID

    func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        guard attachmentID == attachment else {
            return try await base.downloadOriginal(of: attachmentID, byteCount: byteCount, appendingTo: partial)
        }
        throw TransportError(
            .invalidResponse, request: "GET /media/\(attachmentID)", status: 200,
            message: "the answer names no X-Outpost-SHA256 of the whole file")
    }
}
