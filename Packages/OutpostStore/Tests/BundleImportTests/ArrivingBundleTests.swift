@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostTesting
import OutpostWire
import Synchronization
import Testing

/// An import that reads a bundle while it is downloaded (`BundleArrival`): it reads what has arrived,
/// waits for the rest, ends where the download finished, and rolls back when the download fails or the
/// bundle is refused before the download ended, without waiting on a download that will not come.
@Suite(.fieldService) struct ArrivingBundleTests {
    /// How many issues the large bundle adds to the sample project: three progress reports' worth.
    static let issues = 3_000

    /// A workspace holding the sample project with `issues` more issues, and its bundle's bytes.
    static func largeBundle(_ format: BundleFormat) throws -> (workspace: Workspace, bytes: Data) {
        let workspace = try Workspace()
        let more = (0..<issues).map { index in
            Issue(id: SampleProject.id(10_000 + index), sync: SampleProject.sync(20), projectID: SampleProject.project,
                title: "Issue \(index) found on the walk-through", details: "Row \(index): photographed, to be fixed").record
        }
        try workspace.save(SampleProject.records + more)
        let url = workspace.url("source.\(format.rawValue)")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: url)
        return (workspace, try Data(contentsOf: url))
    }

    /// Writes `bytes` into `url` as a download would, in pieces, telling `arrival` after each.
    final class Download: @unchecked Sendable {
        let url: URL
        let arrival: BundleArrival
        private let handle: FileHandle
        private(set) var written = 0

        init(into url: URL, arrival: BundleArrival) throws {
            self.url = url
            self.arrival = arrival
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw CocoaError(.fileWriteUnknown) }
            handle = try FileHandle(forWritingTo: url)
        }

        deinit { try? handle.close() }

        func write(_ bytes: Data, upTo end: Int) throws {
            while written < end {
                let next = min(end, written + 16 * 1024)
                try handle.write(contentsOf: bytes[written..<next])
                written = next
                arrival.noteWritten(Int64(written))
            }
        }
    }

    /// Runs `body` on a thread of its own, started now: a download that must not wait for a thread of
    /// Swift's cooperative pool (under a full `make test` the pool was busy for minutes, and a download
    /// started as a task began only after the import had waited out its budget).
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> Task<T, any Error> {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            result.withLock { $0 = Result { try body() } }
            done.signal()
        }.start()
        return Task { try await offThePool { () throws -> T in
            done.wait()
            return try result.withLock { $0! }.get()
        } }
    }

    /// `body`'s value and how long it took, timed on its own thread (not counting the wait for a thread of
    /// the cooperative pool to resume the caller).
    static func timed<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> (T, Duration) {
        await offThePool { () -> (T, Duration) in
            let started = ContinuousClock.now
            let value = body()
            return (value, ContinuousClock.now - started)
        }
    }

    /// Whether `condition` held within `seconds`, checked every 10 ms.
    static func eventually(within seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return condition()
    }

    /// The import writes records from the part that has arrived before the rest comes: the download
    /// holds back its last quarter until the import reported a thousand records (it fails to overlap
    /// if the import waits for the whole file), and the rows are those of the whole file imported.
    @Test(arguments: BundleFormat.allCases)
    func aBundleImportsWhileItArrives(format: BundleFormat) async throws {
        let (workspace, bytes) = try Self.largeBundle(format)
        let whole = workspace.url("whole.\(format.rawValue)")
        try bytes.write(to: whole)
        let expected = try LocalStore.open(at: try workspace.database("expected.sqlite")).importBundle(at: whole, fromServer: true)

        let target = try workspace.database("target.sqlite")
        let store = try LocalStore.open(at: target)
        // Patient enough to wait for the held-back quarter (the default gives way after 2 s).
        let arrival = BundleArrival(fastAfterBytes: 0, fastBytesPerSecond: 0, waitingBudget: .seconds(120))
        let download = try Download(into: workspace.url("arriving.\(format.rawValue)"), arrival: arrival)
        let reported = Mutex(0)
        // The import and the download each run on a thread of their own, started at once: neither waits
        // for a thread of the cooperative pool (the download blocks while it holds back its last quarter).
        let importing = Self.onThread { () throws -> ImportSummary in
            try store.importBundle(at: download.url, fromServer: true, arriving: arrival) { progress in
                reported.withLock { $0 = max($0, progress.records) }
            }
        }
        let writer = Self.onThread { () throws -> Bool in
            try download.write(bytes, upTo: bytes.count * 3 / 4)
            let overlapped = Self.eventually(within: 60) { reported.withLock { $0 } >= 1_000 }
            try download.write(bytes, upTo: bytes.count)
            arrival.finish()
            return overlapped
        }
        let summary = try await importing.value
        #expect(try await writer.value, "the import read nothing until the whole file had arrived")
        #expect(summary.total == expected.total)
        #expect(try workspace.contents(of: target) == workspace.contents(of: workspace.folder.appendingPathComponent("expected.sqlite").path))
    }

    /// A download that fails part way ends the import with an error whose cause is the download's, and
    /// the store keeps every row it had.
    @Test(arguments: BundleFormat.allCases)
    func aDownloadThatFailsLeavesTheStoreAsItWas(format: BundleFormat) async throws {
        struct LinkDropped: Error, Sendable {}
        let (workspace, bytes) = try Self.largeBundle(format)
        let target = try workspace.database("target.sqlite")
        let store = try LocalStore.open(at: target)
        _ = try await store.save(Issue(projectID: SampleProject.project, title: "Written on the device before the pre-sync"))
        let before = try workspace.snapshot(of: target)
        let arrival = BundleArrival(fastAfterBytes: 0, fastBytesPerSecond: 0, waitingBudget: .seconds(120))
        let download = try Download(into: workspace.url("arriving.\(format.rawValue)"), arrival: arrival)
        let writer = Self.onThread { () throws in
            try download.write(bytes, upTo: bytes.count / 2)
            Thread.sleep(forTimeInterval: 0.2)
            arrival.fail(LinkDropped())
        }
        let outcome = await offThePool { () -> Result<ImportSummary, BundleError> in
            Result { () throws(BundleError) in try store.importBundle(at: download.url, fromServer: true, arriving: arrival) }
        }
        try await writer.value
        guard case .failure(let error) = outcome else {
            Testing.Issue.record("the import of half a bundle succeeded")
            return
        }
        #expect(error.underlying is LinkDropped && !arrival.importGaveWay, "\(error)")
        #expect(try workspace.snapshot(of: target) == before)
    }

    /// A download that slows once the import has begun (the crew walked out of the Wi-Fi) does not keep
    /// the store's write lock: the import gives way once it has waited its budget, rolls back and says
    /// so (`importGaveWay`), and the whole file imports once it has arrived.
    @Test(arguments: BundleFormat.allCases)
    func anImportGivesWayToASlowDownload(format: BundleFormat) async throws {
        let (workspace, bytes) = try Self.largeBundle(format)
        let target = try workspace.database("target.sqlite")
        let store = try LocalStore.open(at: target)
        let before = try workspace.snapshot(of: target)
        let arrival = BundleArrival(fastAfterBytes: 0, fastBytesPerSecond: 0, waitingBudget: .milliseconds(300))
        let download = try Download(into: workspace.url("arriving.\(format.rawValue)"), arrival: arrival)
        try download.write(bytes, upTo: bytes.count / 2)
        let (outcome, took) = await Self.timed { () -> Result<ImportSummary, BundleError> in
            Result { () throws(BundleError) in try store.importBundle(at: download.url, fromServer: true, arriving: arrival) }
        }
        #expect(took < .seconds(30))
        #expect(arrival.importGaveWay)
        guard case .failure = outcome else {
            Testing.Issue.record("half a bundle was imported")
            return
        }
        #expect(try workspace.snapshot(of: target) == before)
        try download.write(bytes, upTo: bytes.count)
        arrival.finish()
        let summary = try store.importBundle(at: download.url, fromServer: true)
        #expect(summary.total.inserted == Self.issues + SampleProject.records.count, "\(summary)")
    }

    /// A bundle refused before its download ended (an issue with a status no rule allows, in the part
    /// that arrived) ends the import at once with its located error: the reader does not wait on a
    /// download that has stalled, and nothing is written. (A refusal the import can only make at the
    /// end, a duplicate id staged, waits for the download like the rest: its failure or the transport's
    /// timeout ends it.)
    @Test(arguments: BundleFormat.allCases)
    func aRefusalBeforeTheDownloadEndsDoesNotWaitForIt(format: BundleFormat) async throws {
        let (workspace, bytes) = try Self.largeBundle(format)
        let text = try #require(String(data: bytes, encoding: .utf8))
        let status = format == .xml ? "<status>open</status>" : "\"status\": \"open\""
        let range = try #require(text.range(of: status))
        let broken = Data(text.replacingCharacters(in: range, with: status.replacingOccurrences(of: "open", with: "shelved")).utf8)
        let target = try workspace.database("target.sqlite")
        let store = try LocalStore.open(at: target)
        let before = try workspace.snapshot(of: target)
        let arrival = BundleArrival(fastAfterBytes: 0, fastBytesPerSecond: 0, waitingBudget: .seconds(120))
        let download = try Download(into: workspace.url("arriving.\(format.rawValue)"), arrival: arrival)
        // Three quarters arrive; the rest never does (the link stalled), until the test ends.
        try download.write(broken, upTo: broken.count * 3 / 4)
        let (outcome, took) = await Self.timed { () -> Result<ImportSummary, BundleError> in
            Result { () throws(BundleError) in try store.importBundle(at: download.url, fromServer: true, arriving: arrival) }
        }
        arrival.fail(CancellationError())
        #expect(took < .seconds(30))
        guard case .failure(let error) = outcome else {
            Testing.Issue.record("a bundle with an unknown status was imported")
            return
        }
        #expect([.invalidRecord, .schemaViolation].contains(error.code) && error.line != nil, "\(error)")
        #expect(try workspace.snapshot(of: target) == before)
    }

    /// A pre-sync asks for one project; a bundle of another (a broken or hostile server's answer) is
    /// refused with `outsideProject` and nothing is written, whether it arrives or lies whole on disk
    /// (attack 57: it was imported, and the device took the other project's position as the one asked).
    @Test(arguments: BundleFormat.allCases)
    func aBundleOfAnotherProjectThanAskedIsRefused(format: BundleFormat) throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.\(format.rawValue)")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: url)
        let target = try workspace.database("target.sqlite")
        let store = try LocalStore.open(at: target)
        let before = try workspace.snapshot(of: target)
        let asked = SampleProject.id(999)
        #expect(performing: { try store.importBundle(at: url, fromServer: true, project: asked) }, throws: { error in
            (error as? BundleError)?.code == .outsideProject
        })
        #expect(try workspace.snapshot(of: target) == before)
        #expect(try store.bundlePositions().isEmpty)
        let summary = try store.importBundle(at: url, fromServer: true, project: SampleProject.project)
        #expect(summary.total.inserted == SampleProject.records.count)
    }

    /// A download that has not yet shown it is fast keeps the import waiting until it has, finished or
    /// failed: on a slow link the store's write lock is not held while the bytes trickle in.
    @Test func theImportWaitsForASlowDownloadToEnd() async throws {
        let arrival = BundleArrival(fastAfterBytes: 1 << 20, fastBytesPerSecond: 1e12)
        let ready = Mutex(false)
        let waiter = Task {
            await arrival.readyToImport()
            ready.withLock { $0 = true }
        }
        arrival.noteWritten(4 << 20)
        try await Task.sleep(for: .milliseconds(200))
        #expect(!ready.withLock { $0 }, "a download at well under the rate let the import begin")
        arrival.finish()
        await waiter.value
        #expect(ready.withLock { $0 })
        // One that is fast lets it begin before the end.
        let fast = BundleArrival(fastAfterBytes: 1 << 20, fastBytesPerSecond: 1)
        fast.noteWritten(64 << 10)
        fast.noteWritten((64 << 10) + (1 << 20))
        await fast.readyToImport()
        #expect(!fast.isWhole)
    }

    /// The link's rate is measured from the first bytes: the time a server takes to start answering
    /// (opening the project's snapshot) says nothing of it, and counted, it held every import back to
    /// 0.2 s into a loopback download (issue 41). The first write's own bytes are not counted either:
    /// one inflated piece of a slow link is a megabyte, however long it took to come.
    @Test func theRateIsMeasuredFromTheFirstBytes() async throws {
        let late = BundleArrival(fastAfterBytes: 1 << 20, fastBytesPerSecond: 8 * 1_048_576)
        try await Task.sleep(for: .milliseconds(500))
        late.noteWritten(64 << 10)
        late.noteWritten(3 << 20)
        #expect(try await readies(late), "a fast link whose first byte came late kept the import waiting")

        let oneBigPiece = BundleArrival(fastAfterBytes: 1 << 20, fastBytesPerSecond: 8 * 1_048_576)
        oneBigPiece.noteWritten(4 << 20)
        try await Task.sleep(for: .milliseconds(500))
        oneBigPiece.noteWritten((4 << 20) + (512 << 10))
        #expect(try await !readies(oneBigPiece), "a first piece alone made a slow link look fast")
        oneBigPiece.finish()
    }

    /// Whether `arrival` lets an import begin within a second.
    private func readies(_ arrival: BundleArrival) async throws -> Bool {
        let ready = Mutex(false)
        let waiter = Task {
            await arrival.readyToImport()
            ready.withLock { $0 = true }
        }
        for _ in 0..<100 where !ready.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        let result = ready.withLock { $0 }
        if !result { arrival.finish() }
        await waiter.value
        return result
    }
}
