import Foundation
import OutpostSchema
import OutpostWire

/// Where the server keeps records, idempotency results, users and upload states. The routes only
/// talk to this protocol, so a PostgreSQL backend can sit beside the embedded SQLite one.
///
/// Every method that touches a project checks the caller's membership itself, inside the same
/// transaction as the work, so a check can never go stale between reading and writing. (A pull page
/// read ahead of its request is checked again when served: see `PreparedPulls`.)
protocol ServerStorage: Sendable {
    /// Runs one trivial query (`SELECT 1`), as `checkHealth` asks.
    func probeDatabase() async throws(ServerError)

    /// Whom a token's SHA-256 (lowercase hex) belongs to and its kind; nil for an unknown or expired token.
    func tokenHolder(forDigest digest: String) async throws(ServerError) -> TokenHolder?

    /// Applies a batch, each mutation at most once per idempotency key; one result per mutation, in order.
    /// A backend loads a `PushSnapshot` for the batch, runs `PushRules.plan` and writes the `PushPlan`,
    /// all in one transaction (see `PushSnapshot.swift`).
    func push(_ mutations: [PushMutation], by caller: Caller, now: Date) async throws(ServerError) -> [MutationResult]

    /// The stored answers (`OutcomeJSON`) of those of `keys` the caller's own pushes applied, to records
    /// the caller may still see (`POST /push/answers`); every other key is left out, as if unknown.
    func storedAnswers(for keys: [UUID], by caller: Caller) async throws(ServerError) -> [(key: UUID, outcome: String)]
    /// Whether every answer the caller's pushes were given is still kept: fewer than
    /// `PushRules.answersKeptPerUser` of theirs are held, and only pruning lets one go, which keeps that many.
    func keepsEveryAnswer(of caller: Caller) async throws(ServerError) -> Bool

    /// The page of changes after `cursor` the caller may see (only `projects` when given: 403 if one is not theirs),
    /// each project's after its own position there (`PullCursor`), merged in sequence order.
    /// The rows go out as stored (`PullPage.json`); in server-id mode the page carries its parents' summaries.
    /// The page ends at `limit` changes, or after the change whose stored fields and clocks bring it to
    /// `maximumBytes` (see `PullPage.Extent`); rows past that point are not read.
    func pull(after cursor: PullCursor, limit: Int, maximumBytes: Int, projects: [UUID]?, by caller: Caller)
        async throws(ServerError) -> PullPage

    /// The caller's memberships and the newest change sequence, now: a pull page read ahead of its request
    /// is served only if they still equal the page's `basis`.
    func pullBasis(of caller: Caller) async throws(ServerError) -> PullBasis
    /// How many memberships the office gave the caller, a role or not: at least as many as the projects
    /// they reach, counted without reading a member record.
    func membershipCount(of caller: Caller) async throws(ServerError) -> Int
    /// This server's salt for member record ids (`Roles.memberRecordID`; "" for a server seeded before).
    func memberIDSalt() async throws(ServerError) -> String
    /// This server's key for sealing cursors (`CursorSeal`): the stored one, or `proposal` stored now
    /// when there is none (two instances proposing at once both get the one stored first).
    func cursorKey(proposing proposal: String) async throws(ServerError) -> String
    /// Writes a consistent copy of the database to the new file `path` (SQLite only).
    func backUp(to path: String) async throws(ServerError)
    /// The checkpoint of change `sequence`: it and the mark of the commit that wrote it (`.empty` for 0).
    func historyCheckpoint(at sequence: Int64) async throws(ServerError) -> HistoryCheckpoint
    /// Whether this history holds `checkpoint` (the commit that wrote that change has that mark): false
    /// once the database was restored from a backup taken before it.
    func holdsHistory(_ checkpoint: HistoryCheckpoint) async throws(ServerError) -> Bool
    /// The newest change sequence of these records (0 for none held): what a push's answers concern.
    func newestSequence(of records: [RecordKey]) async throws(ServerError) -> Int64

    /// A record as stored, tombstones included, whoever may see it: for the operator's and the tests' eyes
    /// (`SyncServer.storedRecord`), never for a route.
    func record(_ entity: EntityType, id: UUID) async throws(ServerError) -> StoredRecord?

    /// A media attachment record of a project where the caller has a role, with that role: 404 for one
    /// that does not exist and for one the caller may not see alike (an answer that told them apart would
    /// tell anyone which ids other projects hold). `archived`: its project takes no more changes, asked of
    /// the store only when `checkingArchive` (an upload; a download of what was stored is not a change).
    func mediaAttachment(_ id: UUID, by caller: Caller, checkingArchive: Bool) async throws(ServerError)
        -> (record: StoredRecord, role: String, archived: Bool)

    /// The upload state of an attachment's file, nil before its first chunk.
    func mediaUpload(_ id: UUID) async throws(ServerError) -> MediaUploadState?

    /// The media bytes (each upload's announced total, finished, under way or reserved) that attachments
    /// of `project` and of `owner` hold, leaving out `attachment`: what the quotas count. A deleted
    /// attachment counts until its file and state are removed.
    func mediaBytesHeld(project: UUID?, owner: UUID, excluding attachment: UUID, reservedSince: Date) async throws(ServerError)
        -> (project: Int64, owner: Int64)

    /// Which of `attachments` the server holds as deleted: their files are not kept.
    func deletedAttachments(among attachments: [UUID]) async throws(ServerError) -> Set<UUID>

    /// Saves (or, with nil, forgets) an attachment's upload state. A state complete with no
    /// `completedSequence` yet takes the next change sequence in the same transaction, which marks the
    /// history (`history_marks`) as a pushed change does; returns the state as saved.
    @discardableResult
    func setMediaUpload(_ state: MediaUploadState?, for id: UUID, now: Date, uploadedBy caller: Caller?) async throws(ServerError) -> MediaUploadState?

    /// A project's records (its opportunity and every record belonging to it, tombstones included),
    /// parents first, for a bundle (404 unknown project, 403 not the caller's, both before it returns).
    /// The records come in batches read on demand from one consistent snapshot, never all at once.
    func bundle(project: UUID, by caller: Caller) async throws(ServerError) -> BundleRecords

    /// Creates the seed's projects, members and tokens, on a server's first start only: a seed loaded again
    /// (a restart with `--seed`) changes nothing, since it would undo the operator's removals and
    /// revocations since. Returns whether it loaded. An operator's addition (`extendsServer`) always loads;
    /// one that only creates projects returns whether it created one, decided in its own transaction, so
    /// of two instances creating one id at once exactly one is told it did (`SyncServer.createProject`).
    /// `logging` is written to the admin log in the same transaction, so a seed never loads without
    /// the entries that name it (a server killed between the two had loaded a seed whose tokens worked
    /// and were in no log, and a restart does not load it again; attack 83).
    @discardableResult
    func load(_ seed: ServerSeed, now: Date, logging: @escaping AdminLogLine.Maker<[AdminLogLine], Bool>) async throws(ServerError) -> Bool

    /// Makes `user` a member of `project` with exactly `role` (nil: the role they hold, or the schema's
    /// default for a new member): the membership (begun now), and their member record created, brought
    /// back, or given the role (`MembershipEdit`); `name` and `email` when given, a member's own kept
    /// otherwise (a user the server has no name for is refused, `MembershipEdit.unnamed`). Says what changed.
    func addMember(
        _ user: UUID, to project: UUID, name: String?, email: String?, role: String?, now: Date,
        logging: @escaping AdminLogLine.Maker<AdminLogLine, MembershipChange>
    ) async throws(ServerError) -> MembershipChange

    /// Takes `user` out of `project`: the membership goes, so their next request to it is refused on
    /// every instance (each request reads memberships), and the project's live member records naming
    /// them become tombstones at the next change sequences, so every device learns. Returns how many
    /// memberships went (0 or 1).
    func removeMember(
        _ user: UUID, from project: UUID, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Int>
    ) async throws(ServerError) -> Int

    /// Archives `project` (`archived`) or brings it back: from the next push on, on every instance (each
    /// push reads it under the writers' lock), its records take no more changes. Whether that changed
    /// anything.
    func setArchived(
        _ project: UUID, _ archived: Bool, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Bool>
    ) async throws(ServerError) -> Bool

    /// Deletes tokens: the one with `digest`, or every token of `user`. Each request reads its token,
    /// so the next one with a deleted token is answered 401 on every instance. Returns how many went.
    func revokeTokens(
        digest: String?, user: UUID?, now: Date, logging: @escaping AdminLogLine.Maker<AdminLogLine, Int>
    ) async throws(ServerError) -> Int

    /// The digests of the tokens whose digest starts with `prefix` (lowercase hex): a token's name as
    /// `tokens(of:)` lists it names one token unless two share it.
    func tokenDigests(startingWith prefix: String) async throws(ServerError) -> [String]

    /// The live records of the membership entity in `project`.
    func memberRecords(of project: UUID) async throws(ServerError) -> [StoredRecord]

    /// The users holding a membership of `project`: who reaches it.
    func memberUsers(of project: UUID) async throws(ServerError) -> Set<UUID>

    /// The tokens of `user` (every user's when nil), newest first, without their secrets; admin tokens too.
    func tokens(of user: UUID?) async throws(ServerError) -> [IssuedToken]

    /// Notes that the token with `digest` was used at `now` (only moving its last use forward).
    func noteTokenUse(digest: String, now: Date) async throws(ServerError)

    /// Appends an entry to the admin log.
    func appendAdminLog(at: Date, actor: String, action: String, details: String) async throws(ServerError)

    /// The newest `limit` entries of the admin log, oldest first.
    func adminLog(limit: Int) async throws(ServerError) -> [AdminLogEntry]

    /// Connects and migrates, for a backend that cannot in its synchronous initializer (PostgreSQL).
    func prepare() async throws(ServerError)

    /// Releases connections once the server stops.
    func close() async
}

/// An admin log entry to write beside the change it names, in its transaction.
struct AdminLogLine: Sendable {
    var actor: String
    var action: String
    var details: String

    /// What an admin change writes to the log, made from what the change did (`Outcome`): a storage
    /// call that changes who may reach what takes one and writes its entry in the change's own
    /// transaction. Written after it, a server stopped or refused a write in between kept a promotion,
    /// a removal or a token that no log held, the seed's case in attack 83.
    typealias Maker<Entries, Outcome> = @Sendable (_ outcome: Outcome) -> Entries
}

extension ServerStorage {
    /// Loads `seed` with nothing to log beside it (a caller that logs its own way).
    @discardableResult
    func load(_ seed: ServerSeed, now: Date) async throws(ServerError) -> Bool {
        try await load(seed, now: now) { _ in [] }
    }

    func prepare() async throws(ServerError) {}
    func close() async {}

    /// The member a token belongs to; nil for an unknown or expired token and for an admin token, which
    /// syncs nothing.
    func caller(forTokenDigest digest: String) async throws(ServerError) -> Caller? {
        guard let holder = try await tokenHolder(forDigest: digest), !holder.isAdmin else { return nil }
        return Caller(userID: holder.userID, tokenDigest: digest)
    }
}

/// How far a media file's upload has come.
struct MediaUploadState: Sendable, Hashable {
    var totalBytes: Int64
    var receivedBytes: Int64
    var sha256: String
    var complete: Bool
    /// The change sequence the upload took when it finished (nil before, and for uploads finished
    /// before schema step 6).
    var completedSequence: Int64?
    /// When its last chunk was stored, as read back (nil for a state not stored yet): an unfinished
    /// upload holds its whole size against the quotas only for `MediaStore.reservationLifetime` after.
    var updatedAt: Date?
}

/// A project's records as a bundle streams them.
struct BundleRecords: Sendable {
    /// The newest `updatedAt` among them, for the bundle's header.
    var asOf: Date?
    /// The project's newest change in the snapshot the records are read from (the linked opportunity's
    /// included), with its mark: the header's checkpoint, which the importing device asks to confirm.
    var checkpoint: HistoryCheckpoint = .empty
    /// The next batch of records in catalog order (parents first), nil after the last: read when asked,
    /// by one caller at a time.
    var next: @Sendable () async throws -> [BundleEntry]?

    /// A page's bounds, on both backends: at most this many records, and no more records once their
    /// stored fields reach `pageBytes` (the row that reaches it still goes, so one larger record moves
    /// the bundle on). A text field may hold 1 MiB: counted in records alone, a page of 500 reached
    /// 500 MB, and four stalled downloads held 7 GB of one server (attack 54).
    static let pageRecords = 500
    static let pageBytes = 4 * 1024 * 1024

}

/// A record on its way into a bundle: its fields still the stored wire JSON (`wireFields`), which the
/// bundle's encoder reads only as far as its format needs (`BundleStreamEncoder.write(_:wireFields:)`),
/// or already decoded (`record.fields`, `wireFields` nil).
struct BundleEntry: Sendable {
    var record: EntityRecord
    var wireFields: String?

    init(_ record: EntityRecord, wireFields: String? = nil) {
        self.record = record
        self.wireFields = wireFields
    }
}

extension ServerStorage {
    /// Returns when the database answers a query within 3 seconds; else a 503 `unavailable` error
    /// saying why: what `/health` reports, so a load balancer takes the instance out.
    func checkHealth() async throws(ServerError) {
        do {
            try await Deadline.run(seconds: 3) { try await self.probeDatabase() }
        } catch {
            throw ServerError(
                status: 503, .unavailable, "the database is not usable: \((error as? ServerError)?.message ?? "\(error)")",
                retryAfterSeconds: 5, underlying: error)
        }
    }
}

/// Runs work with a deadline: a database that hangs (a frozen writer, a lost network, a session
/// the database ended under a query) must make a request fail, not wait with it. The work runs as its
/// own task, cancelled at the deadline, and the answer does not wait for it to notice (a query on a
/// dead connection may not): a push that commits after all is answered `duplicate` when resent.
enum Deadline {
    struct TimedOut: Error, CustomStringConvertible {
        let seconds: Int
        var description: String { "no answer within \(seconds) s" }
    }

    /// `sleep` is the timer's wait (a test's, to see it end); it throws once cancelled.
    static func run<T: Sendable>(
        seconds: Int, sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = Outcome<T>()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            outcome.wait(continuation)
            let task = Task {
                do {
                    outcome.finish(.success(try await work()))
                } catch {
                    outcome.finish(.failure(error))
                }
            }
            // Cancelled by the work's answer: left to sleep out the bound (70 s for every PostgreSQL
            // statement), each timer held its task and the work's closure that long after the answer.
            outcome.arm(Task {
                do {
                    try await sleep(.seconds(seconds))
                } catch {
                    return
                }
                task.cancel()
                outcome.finish(.failure(TimedOut(seconds: seconds)))
            })
        }
    }

    /// The first result wins; every access holds `lock`, hence `@unchecked Sendable`.
    private final class Outcome<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<T, any Error>?
        private var result: Result<T, any Error>?
        private var timer: Task<Void, Never>?

        /// The timer to cancel once a result is in; cancelled now if one already is.
        func arm(_ timer: Task<Void, Never>) {
            let finished = lock.withLock { () -> Bool in
                if result == nil { self.timer = timer }
                return result != nil
            }
            if finished { timer.cancel() }
        }

        func wait(_ continuation: CheckedContinuation<T, any Error>) {
            let known = lock.withLock { () -> Result<T, any Error>? in
                if result == nil { self.continuation = continuation }
                return result
            }
            if let known { continuation.resume(with: known) }
        }

        func finish(_ outcome: Result<T, any Error>) {
            let (waiting, timer) = lock.withLock { () -> (CheckedContinuation<T, any Error>?, Task<Void, Never>?) in
                guard result == nil else { return (nil, nil) }
                result = outcome
                defer { continuation = nil; self.timer = nil }
                return (continuation, self.timer)
            }
            timer?.cancel()
            waiting?.resume(with: outcome)
        }
    }
}
