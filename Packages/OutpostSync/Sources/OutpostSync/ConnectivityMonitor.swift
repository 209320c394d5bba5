import Foundation
import OutpostWire

/// Watches the server's health endpoint, periodically and on demand, and publishes whether it can
/// be reached and how well, so the engine starts a sync when the connection returns and sends
/// media only on a good one.
///
/// On Linux the health check is the only signal. On Apple platforms an app may also call
/// `checkNow()` whenever the system's path monitor reports a change. Time comes from the injected
/// clock, so tests drive the schedule without sleeping.
public actor ConnectivityMonitor {
    private let transport: any SyncTransport
    private let clock: any Clock<Duration>
    private let checkInterval: Duration
    private let offlineCheckInterval: Duration
    private var estimator = QualityEstimator()
    private var loop: Task<Void, Never>?
    private var subscribers: [UUID: AsyncStream<ConnectivityStatus>.Continuation] = [:]

    /// The latest judgement.
    public private(set) var status: ConnectivityStatus = .unknown
    /// The last successful health answer: the server's limits and accepted versions.
    public private(set) var lastHealth: HealthResponse?

    /// Creates a monitor; call `start()` for periodic checks. Checks run every `checkInterval` while
    /// online and every `offlineCheckInterval` while offline, so a returning connection is noticed soon.
    public init(
        transport: any SyncTransport, clock: any Clock<Duration> = ContinuousClock(),
        checkInterval: Duration = .seconds(30), offlineCheckInterval: Duration = .seconds(10)
    ) {
        self.transport = transport
        self.clock = clock
        self.checkInterval = checkInterval
        self.offlineCheckInterval = offlineCheckInterval
    }

    /// Starts periodic checks, the first at once; does nothing if they already run.
    public func start() {
        guard loop == nil else { return }
        loop = Task { [weak self] in
            while !Task.isCancelled, let interval = await self?.checkAndChooseInterval() {
                guard let clock = self?.clock else { return }
                do { try await clock.sleep(for: interval) } catch { return }
            }
        }
    }

    /// Stops periodic checks and ends every status stream.
    public func stop() {
        loop?.cancel()
        loop = nil
        for subscriber in subscribers.values { subscriber.finish() }
        subscribers = [:]
    }

    /// Checks the server now (after a system network change, or when the user pulls to refresh).
    @discardableResult
    public func checkNow() async -> ConnectivityStatus {
        var outcome: Result<HealthResponse, TransportError>?
        let elapsed = await clock.measure {
            do throws(TransportError) {
                outcome = .success(try await transport.health())
            } catch {
                outcome = .failure(error)
            }
        }
        switch outcome {
        case .success(let health)?:
            lastHealth = health
            estimator.record(bytes: 0, duration: elapsed)
            publish(.online(estimator.quality))
        case .failure(let error)?:
            // An answer of any other kind (a refusal, a version error) still proves the server is reachable.
            let unreachable: Set<TransportError.Code> = [.noConnection, .timedOut, .serverFailure, .invalidResponse]
            if unreachable.contains(error.code) {
                publish(.offline)
            } else {
                estimator.record(bytes: 0, duration: elapsed)
                publish(.online(estimator.quality))
            }
        case nil:
            break
        }
        return status
    }

    /// Feeds the measurement of a real request (a push, a media chunk) into the quality estimate:
    /// small ones count as latency, ones of 16 KB or more as throughput.
    public func recordTransfer(bytes: Int64, duration: Duration) {
        estimator.record(bytes: bytes, duration: duration)
        if status.isOnline { publish(.online(estimator.quality)) }
    }

    /// Every status from now on, starting with the current one; the engine starts a sync whenever an
    /// element is online after one that was not.
    public func statusChanges() -> AsyncStream<ConnectivityStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: ConnectivityStatus.self, bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        subscribers[id] = continuation
        continuation.yield(status)
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        return stream
    }

    /// Whether media may be uploaded now under `conditions` (see `ConnectivityStatus.allowsMedia`).
    public func allowsMedia(conditions: SyncConditions) -> Bool {
        status.allowsMedia(conditions: conditions)
    }

    private func checkAndChooseInterval() async -> Duration {
        await checkNow().isOnline ? checkInterval : offlineCheckInterval
    }

    private func publish(_ new: ConnectivityStatus) {
        guard new != status else { return }
        status = new
        for subscriber in subscribers.values { subscriber.yield(new) }
    }

    private func unsubscribe(_ id: UUID) {
        subscribers[id] = nil
    }
}
