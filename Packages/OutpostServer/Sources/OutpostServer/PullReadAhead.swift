import Foundation

/// The next page of a pull whose answer said more changes wait, read and encoded while the client
/// decodes and applies the page it got. A client pulls pages back to back, so without this the
/// server's query and gzip of page N+1 only start once the client is done with page N.
///
/// Serving a page read a moment before it is asked for is what a pull allows anyway: every later
/// change gets a later sequence than the page's cursor, so the next pull brings it and none is skipped.
/// A prepared page goes only to the same user asking for the same cursor, limit, projects and encoding,
/// and only while that user's memberships are the ones it was read with (`SyncServer` checks that on
/// every use, so a member removed in between gets nothing the prepared page holds).
actor PullReadAhead {
    /// What a pull asks for, as far as its answer depends on it.
    struct Request: Hashable, Sendable {
        let user: UUID
        let after: Int64
        let limit: Int
        let projects: [UUID]?
        let gzip: Bool

        /// The same pull, continued after `cursor`.
        func continued(after cursor: Int64) -> Request {
            Request(user: user, after: cursor, limit: limit, projects: projects, gzip: gzip)
        }
    }

    /// One page's answer, ready to send.
    struct Answer: Sendable {
        let body: JSONBody
        let records: Int
        let nextCursor: Int64
        let hasMore: Bool
        /// The projects the user belonged to when the page was read.
        let memberships: Set<UUID>
    }

    /// Pages held at once, at most: one per user pulling at the moment, each at most a page of
    /// `maximumPullLimit` records. A page past this evicts the oldest one.
    let maximumPages: Int
    /// A page not asked for within this is dropped: its client stopped pulling.
    let lifetime: Duration

    private var pages: [Request: (answer: Task<Answer?, Never>, started: ContinuousClock.Instant)] = [:]

    init(maximumPages: Int = 32, lifetime: Duration = .seconds(30)) {
        self.maximumPages = maximumPages
        self.lifetime = lifetime
    }

    /// The page prepared for `request`, removed from the store; nil when none was.
    func take(_ request: Request) -> Task<Answer?, Never>? {
        pages.removeValue(forKey: request)?.answer
    }

    /// Starts reading the page for `request`; `read` returns nil when it fails, and the pull that asks
    /// for it then reads it itself (and reports the error).
    func prepare(_ request: Request, _ read: @escaping @Sendable () async -> Answer?) {
        let now = ContinuousClock.now
        for (key, page) in pages where now - page.started >= lifetime {
            page.answer.cancel()
            pages[key] = nil
        }
        if pages.count >= maximumPages, let oldest = pages.min(by: { $0.value.started < $1.value.started }) {
            oldest.value.answer.cancel()
            pages[oldest.key] = nil
        }
        pages[request]?.answer.cancel()
        pages[request] = (Task { await read() }, now)
    }

    /// How many pages are held once every read under way has ended, for tests.
    func settledCount() async -> Int {
        for page in pages.values { _ = await page.answer.value }
        return pages.count
    }
}
