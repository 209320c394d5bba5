/// Bytes sent and received by a transport, so the engine can report each run's traffic and
/// honour data budgets.
public struct TransferCounts: Sendable, Hashable {
    /// Bytes of request bodies as sent (after compression) and of request headers.
    public var bytesSent: Int64
    /// Bytes of response bodies as received (before decompression when the size is known) and headers.
    public var bytesReceived: Int64
    /// Requests that got an HTTP answer or failed.
    public var requests: Int

    /// Creates counts; zero by default.
    public init(bytesSent: Int64 = 0, bytesReceived: Int64 = 0, requests: Int = 0) {
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.requests = requests
    }

    /// The traffic since `earlier`: what one sync run moved.
    public func since(_ earlier: TransferCounts) -> TransferCounts {
        TransferCounts(
            bytesSent: bytesSent - earlier.bytesSent, bytesReceived: bytesReceived - earlier.bytesReceived,
            requests: requests - earlier.requests)
    }
}
