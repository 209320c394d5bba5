import OutpostWire

/// What the queue does with a request that failed.
enum RetryDecision: Sendable, Hashable {
    /// Send it again after this wait.
    case retry(after: Duration)
    /// Mark the mutation failed and show the user this reason (a refusal, or the last of its retries).
    case fail(TransportError)
    /// Stop sending, keep every mutation as it is, and resume when new credentials are set (HTTP 401).
    case pauseUntilCredentialsRenewed
    /// Stop sending, keep every mutation, and tell the user the app needs an update (unsupported version).
    case pauseUntilAppUpdated
}
