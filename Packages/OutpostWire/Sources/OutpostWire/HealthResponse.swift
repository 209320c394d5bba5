import Foundation

/// What the health endpoint reports: that the server is up, and the limits and versions it
/// accepts, so a client learns them before it sends anything.
public struct HealthResponse: Sendable, Hashable, Codable {
    /// "ok" when the server accepts sync traffic.
    public var status: String
    /// The protocol versions the server speaks.
    public var minimumProtocolVersion: Int
    /// The newest protocol version the server speaks.
    public var maximumProtocolVersion: Int
    /// The oldest client schema version the server accepts.
    public var minimumSchemaVersion: Int
    /// The newest client schema version the server accepts.
    public var maximumSchemaVersion: Int
    /// The most mutations one push may carry.
    public var maximumBatchSize: Int
    /// The most changes one pull page returns.
    public var maximumPullLimit: Int
    /// Whether the server assigns its own (integer) ids, returned as `serverID`.
    public var assignsServerIDs: Bool
    /// The server's clock, for diagnosing skewed devices.
    public var serverTime: Date

    /// Creates a health report.
    public init(
        status: String = "ok", minimumProtocolVersion: Int = 1, maximumProtocolVersion: Int = SyncProtocol.version,
        minimumSchemaVersion: Int, maximumSchemaVersion: Int, maximumBatchSize: Int = 500,
        maximumPullLimit: Int = 1000, assignsServerIDs: Bool = false, serverTime: Date
    ) {
        self.status = status
        self.minimumProtocolVersion = minimumProtocolVersion
        self.maximumProtocolVersion = maximumProtocolVersion
        self.minimumSchemaVersion = minimumSchemaVersion
        self.maximumSchemaVersion = maximumSchemaVersion
        self.maximumBatchSize = maximumBatchSize
        self.maximumPullLimit = maximumPullLimit
        self.assignsServerIDs = assignsServerIDs
        self.serverTime = serverTime
    }
}

/// What a probe route answers (`/livez`, `/readyz`): plain HTTP for a load balancer, no protocol headers.
public struct ProbeResponse: Sendable, Hashable, Codable {
    /// `live` (the process serves) or `ready` (its database answers too).
    public var status: String

    /// A probe's answer.
    public init(status: String) {
        self.status = status
    }
}
