import Foundation
import Logging
import OutpostConflicts

/// Everything `outpost serve` can set: where to listen, where the data lives, and the limits that
/// keep one client from exhausting the server. The defaults are what `/health` advertises.
public struct ServerConfiguration: Sendable, Hashable {
    /// The address to bind; `127.0.0.1` keeps a demo server off the network.
    public var host: String
    /// The port to bind; 0 picks a free one (read it back from `SyncServer.port`).
    public var port: Int
    /// The SQLite file holding every record; created and migrated on start. Unused with `postgresURL`.
    public var databasePath: String
    /// A `postgres://user:password@host:port/database?sslmode=…` URL: when set, records live in that
    /// PostgreSQL database (migrated on start) instead of the SQLite file, and several servers may share it.
    public var postgresURL: String?
    /// Where media files go; by default a `<database>.media` folder next to the database.
    public var mediaDirectory: String
    /// Whether creates get a server-assigned integer id, returned as `serverID` (`--server-ids`).
    public var assignsServerIDs: Bool
    /// The most mutations one push may carry (413 `batch_too_large` above).
    public var maximumBatchSize: Int
    /// The most changes one pull page returns, whatever the client asks.
    public var maximumPullLimit: Int
    /// Where a pull page stops early: after the change whose stored fields and clocks bring the page to
    /// this many bytes (one change always goes). Keeps pages of large records (inline thumbnails) from
    /// growing with the limit on a phone or on the server; a page of issues is far below it.
    public var maximumPullPageBytes: Int
    /// The largest JSON request body accepted, after decompression (413 `payload_too_large` above).
    public var maximumBodyBytes: Int
    /// The largest media chunk accepted in one PUT.
    public var maximumChunkBytes: Int
    /// The largest media file accepted.
    public var maximumMediaBytes: Int64
    /// The most media bytes one project's live attachments may hold (uploaded or under way): one
    /// project cannot fill the disk every other project's photos go to. Default 100 GiB.
    public var maximumMediaBytesPerProject: Int64 = 100 << 30
    /// The most media bytes one member's live attachments may hold, across projects. Default 25 GiB.
    public var maximumMediaBytesPerUser: Int64 = 25 << 30
    /// The most bytes one project's records may hold as the server stores them (fields and clocks; a
    /// deleted record keeps its last values, and its bytes): past it a change that adds bytes is
    /// refused (`payload_too_large` for that mutation; its device keeps it, shown as refused), and one
    /// that adds none still goes. Default 4 GiB.
    public var maximumRecordBytesPerProject: Int64 = defaultRecordBytesPerProject
    /// The most bytes the records one member wrote last may hold, across projects, as
    /// `maximumRecordBytesPerProject` counts them (a record another member adds bytes to becomes theirs
    /// to count, one they delete or change without adding bytes stays its writer's; the office's writes
    /// count for the record's creator): a member may create up to a thousand
    /// projects, so this is what bounds one member. One crew token's pushes of large texts grew a
    /// database by 1.9 GB a minute until the disk was full and every project's pushes failed. Deleting
    /// a record frees none of its bytes (the server keeps its last values); shortening its texts does.
    /// The disk holds about three times the bytes counted for small records (ids, indexes, the answers
    /// kept for idempotency keys). Default 1 GiB.
    public var maximumRecordBytesPerUser: Int64 = defaultRecordBytesPerUser
    static let defaultRecordBytesPerProject: Int64 = 4 << 30
    static let defaultRecordBytesPerUser: Int64 = 1 << 30
    /// The request body bytes one caller (one bearer token) may have under way at once, from a body's
    /// first byte until its answer is written: a body past it has its connection closed. Nil: four of
    /// the largest body or chunk the server takes. One member's token held 150 push bodies, each one byte
    /// short, and the server reached 1.36 GB.
    public var maximumBodyBytesInFlightPerCaller: Int?
    /// The request body bytes every caller together may have under way at once (as
    /// `maximumBodyBytesInFlightPerCaller`). Nil: 128 MiB, or four callers' bound if that is more.
    public var maximumBodyBytesInFlight: Int?
    /// The push bounds the protocol fixes (`PushRules.Bounds`); tests lower them. The records quotas in
    /// them are `maximumRecordBytesPerProject` and `maximumRecordBytesPerUser` (`effectivePushBounds`).
    var pushBounds = PushRules.Bounds()

    /// Keeps only `count` of each member's newest idempotency answers, pruned once a member's applied
    /// answers reach `interval` more: for tests of what a device does once its lost answer is gone,
    /// which the protocol's figures (20,000) would need a long run to reach.
    package mutating func keepAnswers(_ count: Int, pruningEvery interval: Int64) {
        pushBounds.answersKeptPerUser = count
        pushBounds.answerPruningInterval = interval
    }

    /// `pushBounds` with the records quotas set here.
    var effectivePushBounds: PushRules.Bounds {
        var bounds = pushBounds
        bounds.recordBytesPerProject = maximumRecordBytesPerProject
        bounds.recordBytesPerUser = maximumRecordBytesPerUser
        return bounds
    }
    /// The free disk space media uploads leave on the media folder's volume, for the database (on one
    /// machine, the same disk): an upload that would go below it is refused (507 `insufficient_storage`)
    /// and structured pushes keep working. One member's unfinished upload once filled the disk, and every
    /// push then failed "database or disk is full". Default 256 MiB.
    public var mediaDiskReserveBytes: Int64 = 256 << 20
    /// The free disk space pushes leave on the SQLite file's volume: a push that finds less is refused
    /// (507 `insufficient_storage`, `Retry-After`; devices keep their changes) and pulls keep answering.
    /// One writing member's pushes of large values grew a file 728 MB in 20 s. Default 64 MiB, below the
    /// media reserve, so uploads stop first. Not checked on PostgreSQL, whose disk is its server's.
    public var databaseDiskReserveBytes: Int64 = 64 << 20
    /// The longest a request waits for a lock (the write lock another instance or process holds)
    /// before it is answered 503 with `Retry-After`; on PostgreSQL also the longest one statement may
    /// run. Without them one stalled writer held every instance's pushes until the clients gave up.
    /// Default 10 s.
    public var databaseLockWaitSeconds: Int = 10
    /// PostgreSQL: how long a session may sit idle inside a transaction before the database ends it
    /// and frees its locks: an instance frozen mid-push (SIGSTOP, a VM paused) otherwise held the
    /// write lock for as long as it stayed frozen. Default 15 s; a write transaction of this server
    /// never waits on anything outside the database.
    public var idleTransactionSeconds: Int = 15
    /// The client schema versions accepted (`Outpost-Schema-Version`).
    public var schemaVersions: ClosedRange<Int>
    /// Whether a pull that says more changes wait has its next page read and encoded before the client
    /// asks for it: faster back-to-back pages, for up to 32 pages held in memory and 8 reads under way.
    public var readsPullsAhead: Bool
    /// The least severe log level written: `trace`, `debug`, `info` (one line per request), `notice`,
    /// `warning`, `error` or `critical`.
    public var logLevel: String
    /// Seconds a connection may stay open without sending a complete request head: between requests
    /// (keep-alive) and while its headers trickle in. Without it a client that never finished its headers
    /// held its connection open indefinitely, without any login.
    public var idleTimeoutSeconds: Int
    /// Seconds a client may leave an answer unread (the socket full) before its connection is closed.
    public var stalledWriteSeconds: Int
    /// Seconds, in all, a bundle's encoder may wait for its client to read (its spool holds 256 MiB
    /// ahead of the client) while it holds the project's database snapshot; past it the download is cut
    /// (`outpost_bundle_snapshot_cuts_total`). A snapshot held keeps SQLite from checkpointing its WAL
    /// and PostgreSQL from vacuuming: a member reading a large plain bundle at 26 KB/s grew the WAL by
    /// every push, 1.5 GB in 7 minutes (attack 125, F2). Only a client reading a bundle past 256 MiB
    /// more slowly than that waits at all: a device asks for gzip, some 8 million records in 256 MiB.
    public var bundleSnapshotWaitSeconds: Int = 60
    /// How far a bundle's encoder may run ahead of its client, on disk (`BundleSpool`); tests lower it.
    var bundleSpoolAheadBytes = BundleDownload.spoolAheadBytes
    /// On SQLite, a bundle is refused (503) while the WAL holds more than this that readers keep from
    /// being checkpointed (`SQLiteStorage.refuseBundlesWhileTheLogIsBehind`); tests lower it.
    var bundleWALLimitBytes = 256 << 20
    /// The most connections held open at once. A new one past it takes the place of the connection idle
    /// longest (no request under way); when every connection has a request under way, it is closed.
    public var maximumConnections: Int
    /// Requests a token may make per minute on this instance, bursts included; past it a request is
    /// answered 429 `rate_limited` with `Retry-After`. Nil for no limit.
    public var requestsPerMinutePerToken: Int?
    /// How many pushes and pulls of one user the server works on at once; the user's others wait their
    /// turn, in the order they came (their bodies read, their connections held), and a user's pushes go
    /// one at a time besides. A device has one or two under way; the bound keeps one user's parallel
    /// requests, whose cost grows with their projects, from holding every core while everyone else's wait.
    /// Default 2: four let one member's pulls take both cores of a 2-core server (attack 113, F2).
    public var requestsWorkedAtOncePerUser: Int = 2
    /// How pushes that meet a newer server version are settled, per entity: the same policy the apps'
    /// devices merge with (`Device(policy:)`, `SyncEngine(policy:)`). Every response names its
    /// overrides (`Outpost-Conflict-Policy`), and a device whose policy differs stops before it pushes:
    /// with two policies the device would keep one value and the server another.
    public var conflictPolicy: ConflictPolicy
    /// Whether the SQLite backend syncs its log to disk on every commit (`PRAGMA synchronous = FULL`), so
    /// an `applied` answer survives a power loss. Leave it on for any server a device syncs with; turn it
    /// off only for a throwaway server (a test run), as a throwaway PostgreSQL runs with `fsync = off`: an
    /// fsync per push is what such a run spends most on when many servers share one slow disk.
    public var durableCommits: Bool
    /// A PEM certificate chain and its PEM private key: given both, the server speaks only HTTPS (TLS
    /// through swift-nio-ssl); neither, plain HTTP (for loopback, or behind a proxy that ends TLS).
    /// Read when the server starts; a file that is missing or not PEM stops it with the path.
    public var tlsCertificatePath: String?
    /// The private key of `tlsCertificatePath`'s certificate, PEM.
    public var tlsKeyPath: String?
    /// A bearer token for a Prometheus scraper: `/metrics` answers it, or an admin token, and nothing
    /// else (401 without a token, 403 for a member's). The metrics name the projects being pushed to, so
    /// they are not for anyone who can reach the port. Never written anywhere.
    public var metricsToken: String?

    /// The most changes one pull page returns unless configured otherwise: `SyncEngine.defaultPullLimit`'s
    /// page, so a device pulling with its engine's default gets whole pages. One value for the
    /// configuration, `outpost serve --max-pull` and the in-process test server.
    public static let defaultMaximumPullLimit = 5_000

    /// Creates a configuration; only the database path has no default.
    public init(
        databasePath: String, host: String = "127.0.0.1", port: Int = 8080, mediaDirectory: String? = nil,
        assignsServerIDs: Bool = false, maximumBatchSize: Int = 500, maximumPullLimit: Int = ServerConfiguration.defaultMaximumPullLimit,
        maximumPullPageBytes: Int = 4 * 1024 * 1024, maximumBodyBytes: Int = 8 * 1024 * 1024, maximumChunkBytes: Int = 8 * 1024 * 1024,
        maximumMediaBytes: Int64 = 1024 * 1024 * 1024, schemaVersions: ClosedRange<Int> = 1...17,
        logLevel: String = "info", postgresURL: String? = nil, readsPullsAhead: Bool = true,
        conflictPolicy: ConflictPolicy = ConflictPolicy(), idleTimeoutSeconds: Int = 30, stalledWriteSeconds: Int = 60,
        maximumConnections: Int = 1_024, durableCommits: Bool = true, requestsPerMinutePerToken: Int? = nil
    ) {
        self.requestsPerMinutePerToken = requestsPerMinutePerToken
        self.durableCommits = durableCommits
        self.conflictPolicy = conflictPolicy
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.stalledWriteSeconds = stalledWriteSeconds
        self.maximumConnections = maximumConnections
        self.databasePath = databasePath
        self.postgresURL = postgresURL
        self.host = host
        self.port = port
        self.mediaDirectory = mediaDirectory ?? databasePath + ".media"
        self.assignsServerIDs = assignsServerIDs
        self.maximumBatchSize = maximumBatchSize
        self.maximumPullLimit = maximumPullLimit
        self.maximumPullPageBytes = maximumPullPageBytes
        self.maximumBodyBytes = maximumBodyBytes
        self.maximumChunkBytes = maximumChunkBytes
        self.maximumMediaBytes = maximumMediaBytes
        self.schemaVersions = schemaVersions
        self.logLevel = logLevel
        self.readsPullsAhead = readsPullsAhead
    }

    /// The longest any of the server's waits and timeouts may be set to: a day.
    static let longestWaitSeconds = 86_400

    /// Refuses settings the server cannot run with, before anything is opened.
    /// The bounds on request bodies under way, per caller and in all, defaults filled in.
    var bodyBytesInFlight: (perCaller: Int, total: Int) {
        let perCaller = maximumBodyBytesInFlightPerCaller ?? 4 * max(maximumBodyBytes, maximumChunkBytes)
        return (perCaller, maximumBodyBytesInFlight ?? max(128 << 20, 4 * perCaller))
    }

    func validate() throws(ServerError) {
        func check(_ condition: Bool, _ message: String) throws(ServerError) {
            if !condition { throw ServerError(.invalidConfiguration, message: message) }
        }
        try check((0...65535).contains(port), "port \(port) is outside 0…65535")
        try check(maximumBatchSize >= 1, "the batch size limit must be at least 1")
        try check(maximumPullLimit >= 1, "the pull limit must be at least 1")
        try check(maximumPullPageBytes >= 1, "the pull page size must be at least 1 byte")
        try check(maximumBodyBytes >= 1024, "the body limit must be at least 1 KiB")
        try check(maximumChunkBytes >= 1, "the chunk limit must be at least 1 byte")
        try check(maximumMediaBytes >= 1, "the media file limit must be at least 1 byte")
        try check(
            maximumMediaBytesPerProject >= 1 && maximumMediaBytesPerUser >= 1, "media quotas must be at least 1 byte")
        try check(
            maximumRecordBytesPerProject >= 1 && maximumRecordBytesPerUser >= 1, "records quotas must be at least 1 byte")
        try check(schemaVersions.lowerBound >= 1, "schema versions start at 1")
        // Each wait at most a day: SQLite takes its busy timeout as milliseconds in an Int32 (24.8 days)
        // and PostgreSQL a statement six times the lock wait; a longer one stopped the process with a
        // runtime trap, after it had created the database file, rather than being refused here.
        for (seconds, name) in [
            (idleTimeoutSeconds, "the idle timeout"), (stalledWriteSeconds, "the stalled-write timeout"),
            (bundleSnapshotWaitSeconds, "the bundle snapshot wait"),
            (databaseLockWaitSeconds, "the database lock wait"), (idleTransactionSeconds, "the idle transaction limit"),
        ] {
            try check((1...Self.longestWaitSeconds).contains(seconds), "\(name) must be 1 to \(Self.longestWaitSeconds) seconds (a day), not \(seconds)")
        }
        try check(mediaDiskReserveBytes >= 0, "the media disk reserve must not be negative")
        try check(databaseDiskReserveBytes >= 0, "the database disk reserve must not be negative")
        try check(maximumConnections >= 1, "the connection limit must be at least 1")
        let bodies = bodyBytesInFlight
        try check(
            bodies.perCaller >= max(maximumBodyBytes, maximumChunkBytes),
            "a caller's bodies under way must take the largest body and chunk the server accepts")
        try check(bodies.total >= bodies.perCaller, "the bodies under way in all must take one caller's")
        try check((requestsPerMinutePerToken ?? 1) >= 1, "the per-token request limit must be at least 1 a minute")
        try check(requestsWorkedAtOncePerUser >= 1, "a user's requests worked on at once must be at least 1")
        try check(Logger.Level(rawValue: logLevel) != nil, "unknown log level '\(logLevel)'")
        try check(postgresURL != nil || !databasePath.isEmpty, "a SQLite file or a PostgreSQL URL is required")
        try check(!mediaDirectory.isEmpty && mediaDirectory != ".media", "a media folder is required")
        try check((tlsCertificatePath == nil) == (tlsKeyPath == nil), "TLS takes both a certificate and its private key")
        try check(metricsToken.map { !$0.isEmpty && !$0.contains(where: \.isWhitespace) } ?? true,
            "the metrics token must be non-empty text without spaces, as a bearer token is sent")
    }
}
