import Foundation
import OutpostBundles
import OutpostConflicts
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire

/// One device's Outpost: the local store (the source of truth), and, once a server is set, the sync
/// engine and the connectivity monitor. Reads never touch the network; writes land locally at once and
/// sync later. Everything here is wiring: the work is done by the packages it composes.
public final class Device: Sendable {
    /// The local store, for anything the workflows below do not cover.
    public let store: LocalStore
    private let connection: Connection?
    /// At most this many bytes of originals downloaded from the server are kept (`original(of:)`).
    public let originalsCacheBytes: Int64
    private let originalDownloads = OneAtATime()

    /// What a device needs to reach its server.
    public struct Server: Sendable, Hashable {
        /// The sync API's base URL.
        public var url: URL
        /// The crew member's bearer token.
        public var token: String
        /// Whether plain `http://` may reach a server other than this device; off, only HTTPS (and
        /// loopback) is used (`HTTPTransport.Configuration.allowsPlainHTTP`).
        public var allowsPlainHTTP: Bool

        /// Creates a server description.
        public init(url: URL, token: String, allowsPlainHTTP: Bool = false) {
            self.url = url
            self.token = token
            self.allowsPlainHTTP = allowsPlainHTTP
        }
    }

    private struct Connection: Sendable {
        let transport: any SyncTransport
        let engine: SyncEngine
        let monitor: ConnectivityMonitor
    }

    /// Opens (creating and migrating as needed) the store at `path`, of `app`'s schema and steps.
    /// Without a server the device works offline only; `transport` replaces HTTP
    /// (`OutpostServerTesting.InProcessServer` in tests). `originalsCacheBytes` bounds the teammates'
    /// originals kept on the device (256 MiB unless the app says otherwise). `keepingFree` is the free
    /// space on the store's volume that pulled pages and pre-sync downloads never take, for the user's
    /// own writes (`LocalStore.open(at:app:synchronous:busyTimeout:keepingFree:)`).
    public init(
        path: String, app: LocalApp, server: Server? = nil, transport: (any SyncTransport)? = nil,
        policy: ConflictPolicy = ConflictPolicy(), originalsCacheBytes: Int64 = 256 << 20,
        keepingFree: Int64 = LocalStore.defaultFreeBytesKept
    ) throws(OutpostError) {
        self.originalsCacheBytes = originalsCacheBytes
        let store: LocalStore
        do {
            store = try LocalStore.open(at: path, app: app, keepingFree: keepingFree)
        } catch {
            throw .store(error)
        }
        self.store = store
        let transport = transport ?? server.map {
            var configuration = HTTPTransport.Configuration(baseURL: $0.url, schemaVersion: app.steps.count)
            configuration.allowsPlainHTTP = $0.allowsPlainHTTP
            return HTTPTransport(configuration: configuration, token: $0.token)
        }
        connection = transport.map { transport in
            let monitor = ConnectivityMonitor(transport: transport)
            return Connection(
                transport: transport,
                engine: SyncEngine(store: store, transport: transport, policy: policy, monitor: monitor),
                monitor: monitor)
        }
    }

    // MARK: Writes

    /// Attaches the file at `file` to `media`, a record of one of the schema's media entities (an app's
    /// video, a field-service photo): the record syncs with structured data, the original follows when
    /// the connection is good. Its `byteSize` and `sha256` are measured from the file.
    @discardableResult
    public func attach<Media: Syncable>(_ media: Media, fileAt file: URL) async throws(OutpostError) -> Media {
        do {
            return try await store.attach(media, originalAt: file)
        } catch {
            throw .store(error)
        }
    }

    /// Creates or updates any record of the schema: parents before children, as the app makes them.
    @discardableResult
    public func save<Model: Syncable>(_ value: Model) async throws(OutpostError) -> Model {
        do {
            return try await store.save(value)
        } catch {
            throw .store(error)
        }
    }

    /// Deletes a record (a tombstone that syncs).
    public func delete<Model: Syncable>(_ value: Model) async throws(OutpostError) {
        do {
            try await store.delete(Model.entityType, id: value.id)
        } catch {
            throw .store(error)
        }
    }

    // MARK: Reads (local only)

    /// The record `id`, tombstones included.
    public func fetch<Model: Syncable>(_ type: Model.Type, id: UUID) throws(OutpostError) -> Model? {
        do {
            return try store.fetch(type, id: id)
        } catch {
            throw .store(error)
        }
    }

    /// Live records whose `field` holds `value`, oldest first: `records(Note.self, where: "jobID", is: .uuid(job))`.
    public func records<Model: Syncable>(_ type: Model.Type, where field: String, is value: FieldValue) throws(OutpostError)
        -> [Model]
    {
        do {
            return try store.fetchAll(type, where: field, equals: value)
        } catch {
            throw .store(error)
        }
    }

    /// The same records as `records(_:where:is:)`, read a window at a time (`RecordList.fetch`): for a
    /// long list, whose screen shows a few dozen of them. A window's read throws the store's `StoreError`.
    public func list<Model: Syncable>(_ type: Model.Type, where field: String, is value: FieldValue) throws(OutpostError)
        -> RecordList<Model>
    {
        do {
            return try store.list(type, where: field, equals: value)
        } catch {
            throw .store(error)
        }
    }

    // MARK: Pre-sync and sync

    /// Imports a project bundle (the night before), reporting progress as it goes: one transaction on the
    /// store, whose `changes()` subscribers hear of every record it wrote. Synchronous: call it off the
    /// main thread.
    @discardableResult
    public func importBundle(at url: URL, progress: (@Sendable (ImportProgress) -> Void)? = nil) throws(OutpostError)
        -> ImportSummary
    {
        do {
            return try store.importBundle(at: url, progress: progress)
        } catch {
            throw .bundle(error)
        }
    }

    /// Downloads a project's bundle from the server and imports it: the "pre-sync this project" button.
    /// `progress` reports the import as it goes, as `importBundle(at:progress:)` does. On a device that
    /// held none of the project's records, the next sync then pulls only what changed on the server
    /// after the bundle was made, not the records the bundle brought.
    ///
    /// On a fast link the import reads the bundle while it arrives (`BundleArrival`): the download and
    /// the import overlap. On a slow one the import waits for the whole file, so it holds the store's
    /// write lock no longer than an import of a file does. A failed download rolls the import back and
    /// is thrown as the transport's error.
    ///
    /// The download takes no more of the device's disk than a pull does: on a volume with less free space
    /// than the store keeps (`keepingFree`), it is refused before it starts and stopped as it arrives,
    /// with `storageFull`, nothing imported. What an earlier pre-sync killed midway left in the store's
    /// scratch folder is removed first.
    ///
    /// A server too busy to start the download now (503 or 429, as when too many bundles stream) is
    /// asked again after the wait it names (at most `preSyncBusyWait`), up to `preSyncBusyRetries`
    /// times; then its answer is thrown. Nothing is imported meanwhile. A refusal of any other kind is
    /// thrown at once.
    @discardableResult
    public func preSync(
        project: UUID, format: BundleFormat = .json, progress: (@Sendable (ImportProgress) -> Void)? = nil
    ) async throws(OutpostError) -> ImportSummary {
        var retries = 0
        while true {
            do {
                return try await preSyncOnce(project: project, format: format, progress: progress)
            } catch .transport(let busy) where retries < Self.preSyncBusyRetries && [429, 503].contains(busy.status ?? 0) {
                retries += 1
                // A cancelled wait ends the pre-sync with the server's answer.
                do {
                    try await Task.sleep(for: min(busy.retryAfter ?? Self.preSyncBusyWait, Self.preSyncBusyWait))
                } catch {
                    throw .transport(busy)
                }
            }
        }
    }

    /// How many times a pre-sync asks a busy server again (`preSync`).
    public static let preSyncBusyRetries = 3
    /// The longest a pre-sync waits before asking a busy server again, whatever its `Retry-After` says.
    public static let preSyncBusyWait: Duration = .seconds(30)

    private func preSyncOnce(
        project: UUID, format: BundleFormat, progress: (@Sendable (ImportProgress) -> Void)?
    ) async throws(OutpostError) -> ImportSummary {
        let connection = try connected()
        // In the store's scratch folder, marked as this process's: what a crash leaves there is removed
        // by the next sync's first run or pre-sync (`LocalStore.collectMediaLeftovers`), not left in a
        // temp folder. Three killed pre-syncs left 180 MB there until the next sync (attack 68).
        let file: URL
        do {
            _ = try? store.collectMediaLeftovers()
            try store.checkRoomForDownload()
            file = try store.scratchFile(pathExtension: format.rawValue)
        } catch {
            throw .store(error)
        }
        defer { try? FileManager.default.removeItem(at: file) }
        let arrival = BundleArrival()
        let transport = connection.transport
        let room = DownloadRoom(store: store)
        let download = Task { () -> Result<Int64, TransportError> in
            do throws(TransportError) {
                let size = try await transport.downloadBundle(project: project, format: format, into: file) {
                    arrival.noteWritten($0)
                    // Short of room: the import stops reading (and rolls back), the download is cut.
                    if let shortOfRoom = room.check(written: $0) { arrival.fail(shortOfRoom) }
                }
                arrival.finish()
                return .success(size)
            } catch {
                arrival.fail(error)
                return .failure(error)
            }
        }
        // The import is synchronous and holds its thread for seconds on a large project. Swift's
        // cooperative pool has one thread per core, so run it on a thread of its own and wait for it
        // without holding one of theirs: other tasks (the download, a sync, the UI's reads) keep running.
        @Sendable func importFile(arriving: BundleArrival?) async -> Result<ImportSummary, BundleError> {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<ImportSummary, BundleError>, Never>) in
                let thread = Thread { [self] in
                    continuation.resume(returning: Result { () throws(BundleError) in
                        try store.importBundle(
                            at: file, fromServer: true, project: project, arriving: arriving, progress: progress)
                    })
                }
                thread.name = "outpost-pre-sync-import"
                thread.start()
            }
        }
        room.watch(download)
        // Cancelling the pre-sync cancels the download; the import then fails with it and rolls back.
        var imported = await withTaskCancellationHandler {
            await arrival.readyToImport()
            return await importFile(arriving: arrival)
        } onCancel: {
            download.cancel()
        }
        // The link slowed under an import reading as it arrived: it gave way (rolled back); the whole
        // file is imported once downloaded.
        if case .failure = imported, arrival.importGaveWay, case .success = await download.value {
            imported = await importFile(arriving: nil)
        }
        // An import refused before the download ended stops it; either way nothing writes to the file
        // once this returns (it is removed above).
        if case .failure = imported { download.cancel() }
        let downloaded = await download.value
        if let shortOfRoom = room.failure { throw .store(shortOfRoom) }
        switch (imported, downloaded) {
        case (.success(let summary), .success):
            return summary
        case (.failure(let error), .failure) where !(error.underlying is TransportError) && !arrival.importGaveWay:
            // The import refused the bundle first (a record breaking a rule); the download was cut for it.
            // (One that gave way to a slow download says nothing of the bundle: the download's error is
            // the one to tell, a size limit passed say.)
            throw .bundle(error)
        case (_, .failure(let error)):
            throw .transport(error)
        case (.failure(let error), .success):
            throw .bundle(error)
        }
    }

    /// The original file of `attachment`, a record of a media entity, to read: this device's own copy
    /// when it attached the file, one downloaded earlier, or downloaded from the server now, for a
    /// member of the attachment's project. A download a cut left half done resumes after the bytes it
    /// holds; the whole file is checked against the record's SHA-256 before it is given (a mismatch is
    /// removed and refused with `checksumMismatch`, and the next call starts again from 0). Downloads
    /// are kept within `originalsCacheBytes`, the least recently used going first, and one larger than
    /// the whole budget is refused with `overBudget` before a byte comes; files this device attached are
    /// never among them. One download of an original at a time across the processes on this database.
    /// Read the file before asking for many others: a later download may evict it.
    public func original<Media: Syncable>(of attachment: Media) async throws(OutpostError) -> URL {
        try await original { () throws(StoreError) in try store.originalFile(of: attachment) }.url
    }

    /// Downloads the originals of `project`'s media records that this device does not hold yet: the
    /// files' half of a pre-sync, on office Wi-Fi the night before (`preSync(project:)` brings the
    /// records). Each as `original(of:)` fetches one. The cache keeps the project's newest originals (by
    /// when their records were created) that fit `originalsCacheBytes` together, evicting older ones and
    /// other projects' least recently used for them; an original past the budget is left, and counted.
    /// Choosing them by the records, not by what the cache held, lets a teammate's new photo in once the
    /// cache is full (it was "over the budget" on every run; attack 125, F4), and a run that finds
    /// nothing new downloads and evicts nothing. One the server cannot give keeps its place for the next
    /// run rather than let an older one in to be evicted again then.
    public func downloadOriginals(ofProject project: UUID) async throws(OutpostError) -> OriginalsSummary {
        let files: [OriginalFile]
        do {
            files = try store.originalFiles(ofProject: project)
        } catch {
            throw .store(error)
        }
        store.evictOriginals(within: originalsCacheBytes)
        var summary = OriginalsSummary()
        // The device's own files (attached here) are not the cache's, and take none of its budget.
        let cache = store.originalsFolder.standardizedFileURL.path + "/"
        let own = Set(files.filter { $0.isHeld && !$0.url.standardizedFileURL.path.hasPrefix(cache) })
        summary.alreadyHeld += own.count
        var wanted: [OriginalFile] = []
        var taken: Int64 = 0
        for file in files where !own.contains(file) {
            guard taken + file.byteCount <= originalsCacheBytes else {
                summary.leftOverBudget += 1
                continue
            }
            taken += file.byteCount
            wanted.append(file)
        }
        let spared = Set(wanted.map(\.url))
        for file in wanted {
            do throws(OutpostError) {
                let fetched = try await original(sparing: spared) { () throws(StoreError) in
                    try store.originalFile(of: file.entity, id: file.attachmentID)
                }
                // One another process brought while this run waited for it was held, not downloaded here
                // (attack 126, F5); an empty original has no bytes to receive.
                if fetched.received > 0 || (file.byteCount == 0 && !file.isHeld) {
                    summary.downloaded += 1
                } else {
                    summary.alreadyHeld += 1
                }
                summary.bytesReceived += fetched.received
            } catch {
                // One original the server cannot give (its upload not finished, deleted since) or whose
                // bytes are wrong does not stop the others; a connection that fails does.
                guard Self.concernsOneOriginal(error) else { throw error }
                if Self.isRefusal(error) {
                    summary.refused += 1
                } else {
                    summary.unavailable += 1
                }
            }
        }
        return summary
    }

    private static func concernsOneOriginal(_ error: OutpostError) -> Bool {
        switch error {
        case .transport(let error): error.status == 404 || error.status == 416 || error.code == .invalidResponse
        case .store(let error): error.code == .checksumMismatch || error.code == .overBudget
        default: false
        }
    }

    /// The server's fault, which a user must hear of: bytes that are not the record's, or an answer
    /// that is not one (no digest, a body past its size). Counted as "not available yet", it left
    /// `outpost originals --project` exiting 0 (attack 125, F5).
    private static func isRefusal(_ error: OutpostError) -> Bool {
        switch error {
        case .transport(let error): error.code == .invalidResponse
        case .store(let error): error.code == .checksumMismatch
        default: false
        }
    }

    /// The original `find` names, downloaded unless held; the bytes this call received with it. Keeping
    /// it evicts other originals over the budget, never `spared`.
    private func original(
        sparing spared: Set<URL> = [], _ find: () throws(StoreError) -> OriginalFile
    ) async throws(OutpostError) -> (url: URL, received: Int64) {
        let held: OriginalFile
        do {
            held = try find()
        } catch {
            throw .store(error)
        }
        if held.isHeld { return (held.url, 0) }
        // Refused before a byte comes: a record claiming a huge size must not fill the device.
        guard held.byteCount <= originalsCacheBytes else {
            throw .store(StoreError(
                .overBudget, path: held.url.path,
                message: "the original of \(held.attachmentID.uuidString.lowercased()) has \(held.byteCount) bytes, more than the \(originalsCacheBytes) this device keeps for originals"))
        }
        let connection = try connected()
        // One download of an original at a time in this process (the actor), and across the processes on
        // this database (the store's file lock): two would append to one partial file.
        await originalDownloads.acquire(held.attachmentID)
        let result: Result<(URL, Int64), OutpostError>
        do throws(OutpostError) {
            let lock = try await lockDownload(of: held)
            let file: OriginalFile
            do {
                // Looked up again under the lock: a download that ran meanwhile may have brought it.
                file = try find()
            } catch {
                throw .store(error)
            }
            result = .success(file.isHeld ? (file.url, 0) : try await download(file, over: connection.transport, sparing: spared))
            withExtendedLifetime(lock) {}
        } catch {
            result = .failure(error)
        }
        await originalDownloads.release(held.attachmentID)
        return try result.get()
    }

    /// The cross-process hold on `file`'s download, waited for while another process downloads it (at
    /// most ten minutes, then `databaseBusy`).
    private func lockDownload(of file: OriginalFile) async throws(OutpostError) -> OriginalDownloadLock {
        let deadline = ContinuousClock.now + .seconds(600)
        while true {
            do {
                if let lock = try store.lockOriginalDownload(file) { return lock }
            } catch {
                throw .store(error)
            }
            if Task.isCancelled {
                throw .transport(TransportError(
                    .cancelled, request: "GET /media/\(file.attachmentID.uuidString.lowercased())",
                    message: "cancelled while another process downloaded it"))
            }
            guard ContinuousClock.now < deadline else {
                throw .store(StoreError(
                    .databaseBusy, path: file.url.path,
                    message: "another process on this database is downloading the original of \(file.attachmentID.uuidString.lowercased()); try again"))
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
    }

    private func download(
        _ file: OriginalFile, over transport: any SyncTransport, sparing spared: Set<URL>
    ) async throws(OutpostError) -> (URL, Int64) {
        let held = ((try? FileManager.default.attributesOfItem(atPath: file.url.path))?[.size] as? NSNumber)?.int64Value ?? 0
        if held > file.byteCount { try? FileManager.default.removeItem(at: file.url) }
        var received: Int64 = 0
        if held != file.byteCount || file.byteCount == 0 {
            let outcome: OriginalDownload
            do {
                outcome = try await transport.downloadOriginal(of: file.attachmentID, byteCount: file.byteCount, appendingTo: file.url)
            } catch {
                // Bytes known to be wrong (an answer too long, one resumed elsewhere, no digest) are not
                // kept to be resumed; a cut connection's are.
                if error.code == .invalidResponse { try? FileManager.default.removeItem(at: file.url) }
                throw .transport(error)
            }
            received = outcome.receivedBytes
            // The server holds another file than the record this device has (attached again since its
            // last pull): the bytes are not this record's, whatever they are.
            guard outcome.sha256 == file.sha256 else {
                try? FileManager.default.removeItem(at: file.url)
                throw .store(StoreError(
                    .checksumMismatch, path: file.url.path,
                    message: "the server's original of \(file.attachmentID.uuidString.lowercased()) has SHA-256 \(outcome.sha256), not the record's \(file.sha256): the file was attached again since this device's last sync; sync, then ask again"))
            }
        }
        do {
            return (try store.keepOriginal(file, within: originalsCacheBytes, sparing: spared), received)
        } catch {
            throw .store(error)
        }
    }

    /// One sync run (pull, push, then media when allowed); see `SyncEngine.sync`.
    @discardableResult
    public func sync(budget: Duration? = nil, conditions: SyncConditions = SyncConditions()) async throws(OutpostError)
        -> SyncReport
    {
        let connection = try connected()
        let report: SyncReport
        do {
            report = try await connection.engine.sync(budget: budget, conditions: conditions)
        } catch {
            throw .store(error)
        }
        // What the run deleted, or took away with a project, takes its cached original with it, and a
        // budget the app lowered holds from now. A sweep that fails leaves a file for the next run; it
        // is no reason to report the sync as failed.
        _ = try? store.sweepOriginals()
        store.evictOriginals(within: originalsCacheBytes)
        return report
    }

    /// Watches the server's health and syncs whenever it comes back, until the returned task is cancelled.
    public func startMonitoring(conditions: SyncConditions = SyncConditions()) throws(OutpostError) -> Task<Void, Never> {
        let connection = try connected()
        return Task {
            await connection.monitor.start()
            await connection.engine.syncOnReconnect(of: connection.monitor, conditions: conditions)
            await connection.monitor.stop()
        }
    }

    /// What a status bar shows: connectivity, pending and failed changes, open conflicts, last sync.
    public func status() async throws(OutpostError) -> DeviceStatus {
        let stored: StoreStatus
        do {
            stored = try store.status()
        } catch {
            throw .store(error)
        }
        return DeviceStatus(connectivity: await connection?.monitor.status ?? .offline, store: stored)
    }

    /// Refreshed status after every local write and every connectivity change.
    public func statusUpdates() -> AsyncStream<DeviceStatus> {
        let (stream, continuation) = AsyncStream<DeviceStatus>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let changes = store.changes()
        let task = Task { [weak self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in changes { await self?.emit(to: continuation) } }
                if let monitor = self?.connection?.monitor {
                    group.addTask { for await _ in await monitor.statusChanges() { await self?.emit(to: continuation) } }
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func emit(to continuation: AsyncStream<DeviceStatus>.Continuation) async {
        if let status = try? await status() { continuation.yield(status) }
    }

    // MARK: Conflicts

    /// Conflicts waiting for the user's choice, oldest first.
    public func openConflicts() throws(OutpostError) -> [OpenConflict] {
        do {
            return try store.openConflicts()
        } catch {
            throw .store(error)
        }
    }

    /// Settles a conflict: `override` brings back the losing side's value (`losingValue`), the losing delete or the
    /// losing restore (`kind`) as a new change, `discard` keeps the winner.
    public func resolve(_ conflict: OpenConflict, choice: ConflictChoice) async throws(OutpostError) {
        do {
            try await store.resolveConflict(conflict.id, choice: choice)
        } catch {
            throw .store(error)
        }
    }

    // MARK: Failed changes

    /// Puts every failed change back in line for the next sync, once its cause is fixed (the app
    /// updated, a long outage over); a failed change otherwise holds back later edits of its record.
    /// Failed photo and voice-note uploads go back in line too. Returns how many.
    @discardableResult
    public func retryFailedChanges() throws(OutpostError) -> Int {
        do {
            return try store.retryFailedMutations() + store.retryFailedMediaUploads()
        } catch {
            throw .store(error)
        }
    }

    /// Pulled records this app version could not take in (a field, kind or choice it does not know),
    /// oldest first, with why: kept aside so the rest of sync goes on, and shown so nobody misses them.
    public func quarantinedRecords() throws(OutpostError) -> [QuarantinedRecord] {
        do {
            return try store.quarantinedRecords()
        } catch {
            throw .store(error)
        }
    }

    private func connected() throws(OutpostError) -> Connection {
        guard let connection else { throw .noServer }
        return connection
    }
}

/// What `Device.downloadOriginals(ofProject:)` did.
public struct OriginalsSummary: Sendable, Hashable {
    /// Originals downloaded (or resumed) by this call.
    public var downloaded = 0
    /// Originals the device held already: its own, or downloaded before.
    public var alreadyHeld = 0
    /// Originals not downloaded, or not kept, because the project's newer originals fill the cache budget.
    public var leftOverBudget = 0
    /// Originals the server could not give now (an upload not finished, an attachment deleted since the
    /// last pull); each is asked for again next time.
    public var unavailable = 0
    /// Originals the server gave with bytes that are not the record's (`checksumMismatch`), or with an
    /// answer that is not one (`invalidResponse`: no digest, a body past its size): nothing of them is
    /// kept, and each is asked for again next time. Counted apart from `unavailable`, which is
    /// the normal state of a teammate's upload not finished yet, since this one is a server's fault a
    /// user must hear of.
    public var refused = 0
    /// Bytes received; a resumed download counts only what it lacked.
    public var bytesReceived: Int64 = 0

    /// Creates a summary.
    public init(
        downloaded: Int = 0, alreadyHeld: Int = 0, leftOverBudget: Int = 0, unavailable: Int = 0, refused: Int = 0,
        bytesReceived: Int64 = 0
    ) {
        self.refused = refused
        self.downloaded = downloaded
        self.alreadyHeld = alreadyHeld
        self.leftOverBudget = leftOverBudget
        self.unavailable = unavailable
        self.bytesReceived = bytesReceived
    }
}

/// The device's sync status, as an app's status bar shows it.
public struct DeviceStatus: Sendable, Hashable {
    /// Whether the server answers, and how well.
    public let connectivity: ConnectivityStatus
    /// Local changes not yet acknowledged by the server.
    public let pendingChanges: Int
    /// Changes the server refused for good or that ran out of retries.
    public let failedChanges: Int
    /// Conflicts waiting for the user.
    public let openConflicts: Int
    /// Original files of photos still to upload.
    public let pendingMediaUploads: Int
    /// When a sync last completed.
    public let lastSuccessfulSync: Date?
    /// Set while the server refuses this device's changes because its clock runs ahead: show it, so the
    /// user fixes the date and time (`StoreStatus.clockWarning`).
    public let clockWarning: String?
    /// Pulled records this app version could not take in, kept aside: show it, so the user knows a
    /// record is missing and updates the app (`Device.quarantinedRecords()` says which).
    public let quarantinedRecords: Int

    init(connectivity: ConnectivityStatus, store: StoreStatus) {
        self.connectivity = connectivity
        pendingChanges = store.pendingChanges
        failedChanges = store.failedChanges
        openConflicts = store.openConflicts
        pendingMediaUploads = store.pendingMediaUploads
        lastSuccessfulSync = store.lastSuccessfulSync
        clockWarning = store.clockWarning
        quarantinedRecords = store.quarantinedRecords
    }
}

/// Why a device operation failed: the failing package's own error, with all its context.
public enum OutpostError: Error, Sendable, CustomStringConvertible {
    /// The local store refused or failed (invalid record, database failure, migration refused).
    case store(StoreError)
    /// A bundle could not be read or imported; nothing was imported.
    case bundle(BundleError)
    /// The server could not be reached or refused a download.
    case transport(TransportError)
    /// The device was opened without a server, so it cannot sync.
    case noServer

    public var description: String {
        switch self {
        case .store(let error): "\(error)"
        case .bundle(let error): "\(error)"
        case .transport(let error): "\(error)"
        case .noServer: "this device was opened without a server; it works offline only"
        }
    }
}

/// Runs one holder per key at a time: a second `acquire` of a key waits for the first's `release`.
private actor OneAtATime {
    private var waiting: [UUID: [CheckedContinuation<Void, Never>]] = [:]

    func acquire(_ key: UUID) async {
        guard waiting[key] != nil else {
            waiting[key] = []
            return
        }
        await withCheckedContinuation { waiting[key, default: []].append($0) }
    }

    func release(_ key: UUID) {
        guard var queue = waiting[key], !queue.isEmpty else {
            waiting[key] = nil
            return
        }
        queue.removeFirst().resume()
        waiting[key] = queue
    }
}

/// The room a pre-sync's download leaves on the store's volume, checked as the file grows (every
/// `checkEvery` bytes): short of what the store keeps free, the download is cut and its failure kept.
private final class DownloadRoom: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var checkedAt: Int64 = 0
    private var shortOfRoom: StoreError?
    private var task: Task<Result<Int64, TransportError>, Never>?
    private let store: LocalStore
    /// 4 MiB: a check (one `statfs`) costs microseconds, the bytes between two checks a few milliseconds.
    static let checkEvery: Int64 = 4 << 20

    init(store: LocalStore) {
        self.store = store
    }

    /// Takes the download's task, to cut it as soon as the room runs short (at once, if it already has).
    func watch(_ download: Task<Result<Int64, TransportError>, Never>) {
        let cut = lock.withLock { () -> Bool in
            task = download
            return shortOfRoom != nil
        }
        if cut { download.cancel() }
    }

    /// Why the download was cut, if it was.
    var failure: StoreError? { lock.withLock { shortOfRoom } }

    /// Checks the room once the file has grown `checkEvery` bytes since the last check; returns the
    /// failure (the first one, once) and cuts the download when the room has run short.
    func check(written: Int64) -> StoreError? {
        let due = lock.withLock { () -> Bool in
            guard shortOfRoom == nil, written - checkedAt >= Self.checkEvery else { return false }
            checkedAt = written
            return true
        }
        guard due else { return nil }
        do {
            try store.checkRoomForDownload()
            return nil
        } catch {
            let cut = lock.withLock { () -> Task<Result<Int64, TransportError>, Never>? in
                shortOfRoom = error
                return task
            }
            cut?.cancel()
            return error
        }
    }
}
