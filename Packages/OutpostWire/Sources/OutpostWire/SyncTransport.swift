import Foundation

/// How the sync engine talks to a server: one call per route of `schemas/sync-api.yaml`. A
/// protocol so the engine runs against `HTTPTransport` in apps and against the reference server's
/// rules in process (`OutpostServerTesting`'s `InProcessServer`) in tests. It lives in the wire package
/// so a transport can be written without linking the engine.
public protocol SyncTransport: Sendable {
    /// Checks the server is up and learns its limits and accepted versions.
    func health() async throws(TransportError) -> HealthResponse

    /// Sends a batch of mutations; each gets its own result, so only transport failures throw.
    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse

    /// Fetches the page of changes after `request.cursor`.
    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse

    /// How much of an attachment's file the server holds: where an upload resumes.
    func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus

    /// Sends one byte range of an attachment's file; the last one completes the upload.
    func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus

    /// Streams a project's pre-sync bundle into the file at `destination` (replacing it) and returns its size.
    func downloadBundle(project: UUID, format: BundleFormat, to destination: URL) async throws(TransportError)
        -> Int64

    /// Streams a project's pre-sync bundle into the file at `destination` (replacing it), calling
    /// `written` with the bytes the file holds after each write, so an import can read the bundle while
    /// it arrives (`BundleArrival`); returns its size. A failed download leaves part of the bundle in the
    /// file, for the caller to remove. A transport that cannot report writes downloads the whole file
    /// first (the default).
    func downloadBundle(
        project: UUID, format: BundleFormat, into destination: URL, written: @escaping @Sendable (Int64) -> Void
    ) async throws(TransportError) -> Int64

    /// Streams an attachment's original into the file at `partial`, after the bytes it holds already
    /// (a download a cut left half done resumes there; a missing file starts from 0). The server
    /// sends at most `byteCount - held` bytes, the size the attachment's record states; more is refused
    /// while it arrives. The caller checks the whole file against the record's SHA-256.
    func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload

    /// What the server kept for changes sent without an answer (`PushAnswersRequest`): one result per key
    /// it applied for this caller, as `duplicate`, none for the others. A transport that cannot ask
    /// throws as a server without the route does (the default), and the engine sends those changes again
    /// under their keys before it pulls.
    func pushAnswers(_ request: PushAnswersRequest) async throws(TransportError) -> PushResponse

    /// Traffic so far; take the difference across a run with `TransferCounts.since(_:)`.
    var transferred: TransferCounts { get async }

    /// The conflict policy the server last named, as sent (`SyncProtocol.conflictPolicyHeader`), or nil
    /// when it named none (an older server, or no answer yet): the engine then cannot compare and
    /// pushes as before.
    var serverConflictPolicyText: String? { get async }
}

extension SyncTransport {
    /// The whole bundle downloaded by `downloadBundle(project:format:to:)`, then reported written at once.
    /// A `ForwardingTransport` keeps this one too, so a wrapper that changes the download (to inject a
    /// failure, to count it) is never skipped by a base that streams.
    public func downloadBundle(
        project: UUID, format: BundleFormat, into destination: URL, written: @escaping @Sendable (Int64) -> Void
    ) async throws(TransportError) -> Int64 {
        let size = try await downloadBundle(project: project, format: format, to: destination)
        written(size)
        return size
    }

    /// A transport that cannot ask: refused as by a server without the route (404), so the engine sends
    /// the changes again under their keys before it pulls. "No answers" instead let the pull judge a
    /// change the server took as concurrent with an edit made on top of it, and under client wins send
    /// it again over that edit, for every transport written without this call (attack 103, F1).
    public func pushAnswers(_ request: PushAnswersRequest) async throws(TransportError) -> PushResponse {
        throw TransportError(
            .rejected, request: "POST /push/answers", status: 404,
            message: "this transport cannot ask what the server kept for changes sent without an answer")
    }

    /// A transport that learns no policy: nil.
    public var serverConflictPolicyText: String? {
        get async { nil }
    }
}

/// A transport that hands every call to another one, `base`: a conforming type writes only the calls
/// it changes (a transport that logs, measures, records or injects failures around a real one), and
/// every other call, the server's policy and the traffic counts included, still reaches `base`. Each
/// wrapper written out in full had once forgotten one: the policy the server names went unseen.
public protocol ForwardingTransport: SyncTransport {
    /// The kind of transport the calls go to.
    associatedtype Base: SyncTransport
    /// Where every call this transport does not replace goes.
    var base: Base { get }
}

extension ForwardingTransport {
    /// `base`'s answer.
    public func health() async throws(TransportError) -> HealthResponse { try await base.health() }

    /// `base`'s answer.
    public func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await base.push(request) }

    /// `base`'s answer.
    public func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse { try await base.pull(request) }

    /// `base`'s answer.
    public func pushAnswers(_ request: PushAnswersRequest) async throws(TransportError) -> PushResponse {
        try await base.pushAnswers(request)
    }

    /// `base`'s answer.
    public func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await base.mediaUploadStatus(for: attachmentID)
    }

    /// `base`'s answer.
    public func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        try await base.uploadMedia(chunk)
    }

    /// `base`'s download.
    public func downloadBundle(project: UUID, format: BundleFormat, to destination: URL) async throws(TransportError)
        -> Int64
    {
        try await base.downloadBundle(project: project, format: format, to: destination)
    }

    /// `base`'s download.
    public func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        try await base.downloadOriginal(of: attachmentID, byteCount: byteCount, appendingTo: partial)
    }

    /// `base`'s traffic.
    public var transferred: TransferCounts {
        get async { await base.transferred }
    }

    /// The policy `base`'s server named.
    public var serverConflictPolicyText: String? {
        get async { await base.serverConflictPolicyText }
    }
}
