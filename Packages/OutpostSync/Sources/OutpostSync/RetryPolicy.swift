import OutpostWire

/// When to try a failed request again: exponential backoff from 1 s, doubling to a 60 s cap, with
/// equal jitter, honouring the server's `Retry-After`, up to a retry limit. Pure and deterministic
/// given the random source, so tests check the schedule without sleeping.
///
/// Equal jitter: the n-th retry waits a uniformly random time between half of `min(cap, 1 s · 2ⁿ⁻¹)`
/// and all of it. Devices that failed together spread out, yet none retries sooner than half the
/// nominal schedule (1, 2, 4, 8, 16, 32, 60, 60 … s).
public struct RetryPolicy: Sendable, Hashable {
    /// The nominal wait before the first retry.
    public var initialDelay: Duration
    /// The longest nominal wait, however many attempts failed.
    public var maximumDelay: Duration
    /// How many retries a mutation gets; the failure after the last one fails it for good.
    public var retryLimit: Int
    /// The longest `Retry-After` honoured, so a wrong header cannot park the queue for days.
    public var maximumRetryAfter: Duration

    /// Creates a policy; the defaults are the product's schedule.
    public init(
        initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60), retryLimit: Int = 10,
        maximumRetryAfter: Duration = .seconds(3600)
    ) {
        precondition(initialDelay > .zero && maximumDelay >= initialDelay && retryLimit >= 0)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.retryLimit = retryLimit
        self.maximumRetryAfter = maximumRetryAfter
    }

    /// The nominal (un-jittered) wait before retry `retry` (1 for the first): 1, 2, 4 … capped.
    func nominalDelay(beforeRetry retry: Int) -> Duration {
        precondition(retry >= 1, "retries count from 1")
        let initial = initialDelay.milliseconds
        let cap = maximumDelay.milliseconds
        let doublings = min(retry - 1, 62)
        let scaled = initial.multipliedReportingOverflow(by: Int64(1) << doublings)
        return .milliseconds(scaled.overflow ? cap : min(cap, scaled.partialValue))
    }

    /// The jittered wait before retry `retry`: between half the nominal delay and all of it, and never
    /// shorter than the server's `retryAfter` (itself capped at `maximumRetryAfter`).
    func delay(
        beforeRetry retry: Int, retryAfter: Duration? = nil, using generator: inout some RandomNumberGenerator
    ) -> Duration {
        let nominal = nominalDelay(beforeRetry: retry).milliseconds
        let half = nominal / 2
        // 53 random bits give a fraction in [0, 1), independent of how the standard library samples ranges.
        let fraction = Double(generator.next() >> 11) * 0x1p-53
        let jittered = Duration.milliseconds(half + Int64((Double(nominal - half) * fraction).rounded(.down)))
        guard let retryAfter else { return jittered }
        return max(jittered, min(retryAfter, maximumRetryAfter))
    }

    /// What to do after a request failed with `error`, when `failedAttempts` attempts (this one included)
    /// have failed so far.
    func decision(
        after error: TransportError, failedAttempts: Int, using generator: inout some RandomNumberGenerator
    ) -> RetryDecision {
        switch error.code {
        case .unauthorized:
            return .pauseUntilCredentialsRenewed
        case .unsupportedVersion:
            return .pauseUntilAppUpdated
        case .rejected where error.serverCode == .rangeMismatch:
            // The server holds a different offset: ask for it and resume at once; not the file's fault.
            return failedAttempts > retryLimit ? .fail(error) : .retry(after: .zero)
        case _ where error.isTransient:
            guard failedAttempts <= retryLimit else { return .fail(error) }
            return .retry(after: delay(beforeRetry: failedAttempts, retryAfter: error.retryAfter, using: &generator))
        default:
            return .fail(error)
        }
    }
}
