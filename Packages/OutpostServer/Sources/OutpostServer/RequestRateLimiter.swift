import Foundation

/// Per-token request limits (`ServerConfiguration.requestsPerMinutePerToken`): a token bucket per
/// token digest, holding a minute's worth of requests and refilled evenly over the minute, so a device
/// may burst (a catch-up pull, a backlog of pushes) but not hold a steady rate above the limit. Per
/// instance: several instances behind a balancer each grant the limit.
actor RequestRateLimiter {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    private let perMinute: Double
    private var buckets: [String: Bucket] = [:]
    /// Buckets idle this long are full again and forgotten, so the table stays as small as the
    /// set of tokens in use.
    private static let forgetAfter: Duration = .seconds(120)
    private var lastSweep = ContinuousClock.now

    init(perMinute: Int) {
        self.perMinute = Double(perMinute)
    }

    /// Nil when a request of `key` may go now (and counts it); else how long until one may.
    func admit(_ key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        sweep(now)
        var bucket = buckets[key] ?? Bucket(tokens: perMinute, updated: now)
        bucket.tokens = min(perMinute, bucket.tokens + (now - bucket.updated) / .seconds(60) * perMinute)
        bucket.updated = now
        defer { buckets[key] = bucket }
        guard bucket.tokens >= 1 else {
            return .seconds(60) * ((1 - bucket.tokens) / perMinute)
        }
        bucket.tokens -= 1
        return nil
    }

    private func sweep(_ now: ContinuousClock.Instant) {
        guard now - lastSweep > Self.forgetAfter else { return }
        lastSweep = now
        buckets = buckets.filter { now - $0.value.updated < Self.forgetAfter }
    }
}
