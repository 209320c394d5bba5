import OutpostWire

/// A coarse judgement of the connection, from measured latency and throughput, that decides
/// whether media may travel.
public enum ConnectionQuality: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Median latency over 1.5 s or throughput under 32 KB/s: structured data only, in small batches.
    case poor
    /// Between poor and good.
    case fair
    /// Median latency at most 400 ms and throughput (once measured) at least 250 KB/s: media may go.
    case good

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .poor: "poor"
        case .fair: "fair"
        case .good: "good"
        }
    }
}
