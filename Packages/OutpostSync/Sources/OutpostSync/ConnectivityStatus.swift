import OutpostWire

/// Whether the server can be reached and how well, as the connectivity monitor judges it.
public enum ConnectivityStatus: Sendable, Hashable, CustomStringConvertible {
    /// No check has finished yet.
    case unknown
    /// The last health check got no usable answer.
    case offline
    /// The server answered; the quality comes from recent latency and throughput.
    case online(ConnectionQuality)

    /// Whether the server answered the last health check.
    public var isOnline: Bool {
        if case .online = self { return true }
        return false
    }

    /// Whether media may be uploaded now: online, and either asked for by the user or on a good
    /// connection that is neither metered nor on a low battery.
    public func allowsMedia(conditions: SyncConditions) -> Bool {
        guard case .online(let quality) = self else { return false }
        if conditions.mediaRequested { return true }
        return quality == .good && !conditions.isMetered && !conditions.isLowBattery
    }

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .offline: "offline"
        case .online(let quality): "online (\(quality))"
        }
    }
}
