/// The constants of the sync protocol that both ends must agree on; `schemas/sync-api.yaml` is
/// the full contract.
public enum SyncProtocol {
    /// The protocol version this client speaks, sent on every request so a server never misreads a payload.
    public static let version = 1

    /// Header carrying `version` on every request and response.
    public static let protocolVersionHeader = "Outpost-Protocol-Version"

    /// Header carrying the client's local schema version on every request.
    public static let schemaVersionHeader = "Outpost-Schema-Version"

    /// Header carrying the SHA-256 (lowercase hex) a media upload must have once complete.
    public static let mediaDigestHeader = "Outpost-Media-SHA256"

    /// Header a server sets on every response, naming the optional forms it reads (comma-separated), so
    /// a client sends a form only to a server that said it reads it.
    public static let acceptsHeader = "Outpost-Accepts"

    /// The `acceptsHeader` token of a server that reads a push mutation's one shared `clock`
    /// (`PushRequest.json(sharingClocks:)`).
    public static let sharedClockForm = "shared-clock"

    /// Bodies above this size (10 KB) travel gzip-compressed; smaller ones are not worth the CPU.
    public static let compressionThreshold = 10 * 1024
}
