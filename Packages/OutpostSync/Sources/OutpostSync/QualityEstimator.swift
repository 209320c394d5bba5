import OutpostWire

/// Judges `ConnectionQuality` from the last few requests: the median latency of small ones and the
/// throughput of large ones, so one slow request does not flip the verdict.
struct QualityEstimator: Sendable {
    /// Requests with at least this many bytes measure throughput; smaller ones measure latency.
    static let throughputSampleBytes: Int64 = 16 * 1024
    static let window = 5
    static let goodLatency = Duration.milliseconds(400)
    static let poorLatency = Duration.milliseconds(1500)
    static let goodThroughput = 250_000.0
    static let poorThroughput = 32_000.0

    private(set) var latencies: [Duration] = []
    private(set) var transfers: [(bytes: Int64, duration: Duration)] = []

    /// Adds one request's measurement.
    mutating func record(bytes: Int64, duration: Duration) {
        if bytes >= Self.throughputSampleBytes {
            transfers.append((bytes, duration))
            if transfers.count > Self.window { transfers.removeFirst() }
        } else {
            latencies.append(duration)
            if latencies.count > Self.window { latencies.removeFirst() }
        }
    }

    /// The median latency of the window, nil before the first sample.
    var medianLatency: Duration? {
        guard !latencies.isEmpty else { return nil }
        return latencies.sorted()[latencies.count / 2]
    }

    /// Bytes per second over the window's large requests, nil before the first.
    var throughput: Double? {
        guard !transfers.isEmpty else { return nil }
        let seconds = transfers.reduce(0.0) { $0 + $1.duration.seconds }
        let bytes = transfers.reduce(0.0) { $0 + Double($1.bytes) }
        return seconds > 0 ? bytes / seconds : .infinity
    }

    /// The verdict; with no throughput sample yet, latency alone decides (the first media chunk measures it).
    var quality: ConnectionQuality {
        let latency = medianLatency ?? .zero
        let rate = throughput
        if latency > Self.poorLatency || (rate.map { $0 < Self.poorThroughput } ?? false) { return .poor }
        if latency <= Self.goodLatency && (rate.map { $0 >= Self.goodThroughput } ?? true) { return .good }
        return .fair
    }
}
