import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostStore
import OutpostWire

/// Pull pages fetched ahead of the one the engine is applying, each requested as soon as the page
/// before it has arrived (its cursor is then known), up to `depth` pages that are not yet taken, through
/// the one read-ahead pipeline (`OutpostModels.ReadAhead`).
///
/// With one page ahead, the next request went out only when the engine began applying a page; on a
/// two-core device sharing the host with its server, the apply then often waited for a page the
/// server had not finished (the package README, "Pages fetched ahead"). The pages wait in memory
/// only: the store's cursor still moves with an applied page alone.
struct PullPrefetch: Sendable {
    /// A page with its records converted for the store.
    struct FetchedPage: Sendable {
        let response: PullResponse
        /// `weight(of: response)`, reckoned once: the read-ahead holds pages by it, and a run of refused
        /// pages is bounded by it (`checkStored`).
        let weight: Int
        var records: [PreparedChange] = []
        /// Changes that could not be converted, with why.
        var unreadable: [(ServerRecord, String)] = []
        /// The bundle positions its request carried (the first request's only).
        var sentBundlePositions: [String] = []
        /// The projects its request asked to read again that the answer named back (the first request's only).
        var sentRereadProjects: [UUID] = []

        init(response: PullResponse) {
            self.response = response
            weight = PullPrefetch.weight(of: response)
        }
    }

    private let pipeline: ReadAhead<FetchedPage, TransportError>
    private let fetcher: Task<Void, Never>

    /// Starts fetching from `cursor`, `limit` changes a page (only `projects`' when given), through `transport`.
    /// Every request carries `checkpoint` (`PullRequest.checkpoint`) and `ownSequences`; the first carries `bundlePositions`
    /// and `rereadProjects`, since the cursors after it are the server's and hold them already.
    init(
        from cursor: String?, limit: Int, depth: Int, projects: [UUID]? = nil, checkpoint: String? = nil,
        bundlePositions: [String] = [], ownSequences: [String] = [], rereadProjects: [UUID] = [], transport: any SyncTransport
    ) {
        let pipeline = ReadAhead<FetchedPage, TransportError>(depth: depth, weightLimit: Self.maximumBytesAhead)
        self.pipeline = pipeline
        fetcher = Task {
            var cursor = cursor
            var emptyPages = 0
            var positions = bundlePositions
            var reread = rereadProjects
            do throws(TransportError) {
                while await pipeline.room() {
                    var page = try await Self.fetch(
                        PullRequest(
                            cursor: cursor, limit: limit, projects: projects, checkpoint: checkpoint, bundlePositions: positions,
                            ownSequences: ownSequences, rereadProjects: reread),
                        from: transport)
                    page.sentBundlePositions = positions
                    // Only what the server says it reads again: an older server ignores the field.
                    page.sentRereadProjects = reread.filter(page.response.rereadProjects.contains)
                    positions = []
                    reread = []
                    try Self.checkProgress(
                        of: page.response, after: cursor, readingAgain: !page.sentRereadProjects.isEmpty, emptyPagesBefore: &emptyPages)
                    pipeline.hand(page, weight: page.weight)
                    guard page.response.hasMore else { break }
                    cursor = page.response.nextCursor
                }
                pipeline.end()
            } catch {
                pipeline.end(throwing: error)
            }
        }
    }

    /// The next page in cursor order; nil after the last one, or once the calling task is cancelled. An
    /// error is the fetch's.
    func next() async throws(TransportError) -> FetchedPage? {
        try await pipeline.next()
    }

    /// How many pages in a row may say more follows while bringing no change: a server skipping a run of
    /// changes the caller may not see can send some; a broken one inventing cursors would never stop.
    static let maximumEmptyPages = 1_000

    /// How many bytes (`weight(of:)`) pages in a row that store nothing may bring: pages of one record
    /// each, just under the answer's limit and refused, took 19 MiB a page, so the count alone let a run
    /// download 19 GB it could not store (attack 130 F2). A run of a thousand refused pages of a
    /// thousand small records each stays well under it.
    static let maximumRefusedBytes = 256 << 20

    /// The pages in a row, up to the last, that said more follow and stored nothing, and their bytes.
    struct RefusedRun {
        var pages = 0
        var bytes = 0
    }

    /// Refuses going on after `maximumEmptyPages` pages in a row that said more follow and stored
    /// nothing (each of their records refused), or once such pages brought `maximumRefusedBytes`: such
    /// a page moves the pull on no more than an empty one, and a server sending refused records without
    /// end kept a sync running for good (round 67 F1). A page of this device's own versions stores something.
    static func checkStored(
        _ page: FetchedPage, refused: Int, revived: Int, storedNothingBefore run: inout RefusedRun
    ) throws(TransportError) {
        let response = page.response
        guard response.hasMore else { return }
        let storedNothing = !response.changes.isEmpty && response.ownRecords.isEmpty && refused >= response.changes.count && revived == 0
        guard storedNothing else {
            run = RefusedRun()
            return
        }
        run.pages += 1
        run.bytes += page.weight
        if run.pages > maximumEmptyPages || run.bytes > maximumRefusedBytes {
            throw TransportError(
                .invalidResponse, request: "POST /pull",
                message: "the server sent \(run.pages) pages in a row (\(run.bytes >> 20) MiB) whose every record this device refused, each saying more follow")
        }
    }

    /// The longest cursor taken: a position per project is about 40 bytes, so room for the 100,000
    /// projects a server's cursor may name, within the 8 MiB a pull request may take.
    static let maximumCursorBytes = 6 << 20

    /// Refuses a page that says more follows but would make the pull go round forever: its cursor is
    /// the one it was asked with (the same page again and again), or too many pages in a row were empty.
    ///
    /// `readingAgain`: the request named projects to read again and the server named them back. It read
    /// them from their beginning, so its cursor moved even when its text is the one sent: a pull cut
    /// after its first page, then a file's import, read that same page again, and the device refused
    /// the answer at every later sync (attack 48 finding 1). The next request carries no such projects,
    /// so a server that goes round is still refused there.
    static func checkProgress(
        of response: PullResponse, after cursor: String?, readingAgain: Bool = false, emptyPagesBefore empty: inout Int
    ) throws(TransportError) {
        // A cursor is saved and sent back with every pull: one a server made huge (63 MiB seen) left
        // every later pull refused by the real server as too large, the device stuck for good.
        guard response.nextCursor.utf8.count <= maximumCursorBytes else {
            throw TransportError(
                .invalidResponse, request: "POST /pull",
                message: "the server's next cursor has \(response.nextCursor.utf8.count) bytes; at most \(maximumCursorBytes) are taken")
        }
        guard response.hasMore else { return }
        if response.nextCursor == cursor, !readingAgain {
            throw TransportError(
                .invalidResponse, request: "POST /pull",
                message: "the server said more changes follow but gave back the cursor it was asked with (\(response.nextCursor))")
        }
        // A page of this device's own changes only (their versions) moved on as much as any other.
        empty = response.changes.isEmpty && response.ownRecords.isEmpty ? empty + 1 : 0
        if empty > maximumEmptyPages {
            throw TransportError(
                .invalidResponse, request: "POST /pull",
                message: "the server sent \(maximumEmptyPages) pages in a row with no change that each said more follow")
        }
    }

    /// The bytes of pages that may wait ahead before no more is fetched: two of the reference server's
    /// (it ends a page at 4 MiB of records), one of a server's that fills the 20 MiB an answer may take.
    /// Counted by pages alone, endless 19 MiB pages held a device about 216 MB: two waiting, one being
    /// applied and one arriving (attack 82).
    static let maximumBytesAhead = 8 << 20

    /// About the bytes of `page`'s records as they arrived: their texts, blobs and field names, and
    /// 16 for each other value. It reads no more than the page's fields, each once.
    static func weight(of page: PullResponse) -> Int {
        var bytes = 0
        for record in page.changes {
            bytes += 64
            for (name, value) in record.fields {
                bytes += name.utf8.count + 16
                switch value {
                case .text(let text): bytes += text.utf8.count
                case .blob(let data): bytes += data.count
                default: break
                }
            }
            bytes += record.clocks.count * 48
        }
        return bytes + page.ownRecords.count * 64 + page.nextCursor.utf8.count
    }

    /// Stops fetching; a page in flight is cancelled and any fetched page is dropped.
    func stop() {
        fetcher.cancel()
        pipeline.stop()
    }

    private static func fetch(_ request: PullRequest, from transport: any SyncTransport)
        async throws(TransportError) -> FetchedPage
    {
        var page = FetchedPage(response: try await transport.pull(request))
        // `HTTPTransport` refuses such a page while reading it; a transport of an app's own may not.
        let count = page.response.changes.count + page.response.ownRecords.count
        guard count <= request.limit else {
            throw TransportError(
                .invalidResponse, request: "POST /pull",
                message: "the page holds \(count) changes, more than the \(request.limit) asked for")
        }
        page.records.reserveCapacity(page.response.changes.count)
        // A record that cannot be converted is quarantined with the page, never allowed to stop the
        // run: otherwise every later run would stop at the same page.
        for change in page.response.changes {
            do {
                page.records.append(PreparedChange(try change.versionedRecord))
            } catch {
                page.unreadable.append((change, "\(error)"))
            }
        }
        return page
    }
}
