import Foundation
import OutpostWire

/// The next page of a pull whose answer said more changes wait, read, written and gzipped before the
/// client asks for it. The engine asks for page N+1 as soon as page N arrives (and applies N meanwhile),
/// so the server's work on N+1 otherwise starts only after N has been sent and decoded; read ahead, it
/// overlaps them, and the request finds its answer ready or under way.
///
/// A prepared page is served only when it is exactly the page a read now would return: the same user
/// asking for the same cursor, limit, projects, encoding and clock form, and the same `PullBasis`
/// (memberships and newest change sequence) as when it was read. Any write in between, or a membership
/// change, makes the request read its page itself. So a read-ahead page never hides a newer version of
/// a record, nor shows a project to someone no longer in it.
///
/// Not a pipeline, hence not `OutpostModels.ReadAhead`: nobody consumes these pages in order. It is a
/// bounded store of answers prepared for requests that may never come (a client that stops pulling),
/// found by the request they answer and checked against what they were read from.
actor PreparedPulls {
    /// What a pull asks for, as far as its answer depends on it.
    struct Request: Hashable, Sendable {
        let user: UUID
        let after: PullCursor
        let limit: Int
        let projects: [UUID]?
        let gzip: Bool
        /// Whether records may carry one shared `clock` (`PullRequest.acceptsSharedClock`).
        let sharedClock: Bool
        /// The sequence of the request's checkpoint, or of the newest bundle position the cursor adopted
        /// when newer (0 without either): the answer's is never older.
        var checkpoint: Int64 = 0
        /// The changes the caller's own pushes made (`PullRequest.ownSequences`): sent as versions only.
        var ownSequences = SequenceRanges()
        /// The projects the request asked to read again (`PullRequest.rereadProjects`), named back in its
        /// answer only: a continued pull has them in its cursor.
        var rereadProjects: [UUID] = []

        /// The same pull, continued after `answer`: from its cursor, and with at least its checkpoint,
        /// which that cursor carries sealed (`CursorSeal.text(of:checkpoint:storage:)`).
        func continued(after answer: Answer) -> Request {
            Request(
                user: user, after: answer.nextCursor, limit: limit, projects: projects, gzip: gzip, sharedClock: sharedClock,
                checkpoint: max(checkpoint, answer.checkpoint), ownSequences: ownSequences)
        }
    }

    /// One page's answer, ready to send, with what it was read against so its use can be checked.
    struct Answer: Sendable {
        let body: JSONBody
        let records: Int
        let nextCursor: PullCursor
        let hasMore: Bool
        let basis: PullBasis
        /// The sequence of the answer's checkpoint.
        var checkpoint: Int64 = 0
    }

    /// Pages held at once, at most: about one per pull under way. A page past this evicts the oldest.
    let maximumPages: Int
    /// Reads under way at once, at most: an evicted read runs to its end (a storage read does not stop
    /// midway), so this, not `maximumPages`, bounds the extra load on the database.
    let maximumReads: Int
    /// A page not asked for within this is dropped: its client stopped pulling.
    let lifetime: Duration

    /// Prepared pages by request, each with when its read started.
    private var pages: [Request: (answer: Task<Answer?, Never>, started: ContinuousClock.Instant)] = [:]
    private var reading = 0

    init(maximumPages: Int = 32, maximumReads: Int = 8, lifetime: Duration = .seconds(30)) {
        self.maximumPages = maximumPages
        self.maximumReads = maximumReads
        self.lifetime = lifetime
    }

    /// The page prepared for `request`, removed from the store; nil when none was, or it expired.
    func take(_ request: Request) -> Task<Answer?, Never>? {
        guard let page = pages.removeValue(forKey: request) else { return nil }
        guard ContinuousClock.now - page.started < lifetime else {
            page.answer.cancel()
            return nil
        }
        return page.answer
    }

    /// Starts reading the page for `request`, unless `maximumReads` are under way; `read` returns nil
    /// when it fails, and the pull that asks for the page then reads it itself (and reports the error).
    func prepare(_ request: Request, _ read: @escaping @Sendable () async -> Answer?) {
        guard reading < maximumReads else { return }
        let now = ContinuousClock.now
        for (key, page) in pages where now - page.started >= lifetime {
            page.answer.cancel()
            pages[key] = nil
        }
        if let replaced = pages.removeValue(forKey: request) {
            replaced.answer.cancel()
        } else if pages.count >= maximumPages, let oldest = pages.min(by: { $0.value.started < $1.value.started }) {
            oldest.value.answer.cancel()
            pages[oldest.key] = nil
        }
        reading += 1
        pages[request] = (Task.detached { [self] in
            let answer = await read()
            await self.finished()
            return answer
        }, now)
    }

    private func finished() {
        reading -= 1
    }

    /// Drops every page, for a server that stops.
    func cancelAll() {
        for page in pages.values { page.answer.cancel() }
        pages.removeAll()
    }

    /// How many pages are held once every read under way has ended, for tests.
    func settledCount() async -> Int {
        for page in pages.values { _ = await page.answer.value }
        return pages.count
    }
}
