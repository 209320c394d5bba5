@testable import OutpostSync
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostServerTesting
import OutpostWire
import Testing

/// A health endpoint alone, answering at once unless a failure is injected. The monitor's tests are
/// about its schedule and what it publishes; the reference server's health check reads its database
/// under a 3 s deadline, which a host running other suites beside this one has overrun. No server rule
/// lives here: every route but `/health` refuses.
actor HealthEndpoint: SyncTransport {
    let assignsServerIDs: Bool
    private var failures: [InjectedFailure] = []
    private(set) var requests = 0

    init(assignsServerIDs: Bool = false) {
        self.assignsServerIDs = assignsServerIDs
    }

    func inject(_ failure: InjectedFailure) {
        failures.append(failure)
    }

    func health() async throws(TransportError) -> HealthResponse {
        requests += 1
        let name = "GET /health"
        switch failures.isEmpty ? nil : failures.removeFirst() {
        case .dropRequest?:
            throw TransportError(.noConnection, request: name, message: "injected: request dropped")
        case .dropResponse?:
            throw TransportError(.timedOut, request: name, message: "injected: response dropped")
        case .httpError(let status, let code, let retryAfter)?:
            throw TransportError(request: name, status: status, body: ErrorBody(code: code, message: "injected"), retryAfter: retryAfter)
        case nil:
            return HealthResponse(
                minimumSchemaVersion: 1, maximumSchemaVersion: 13, assignsServerIDs: assignsServerIDs, serverTime: Date())
        }
    }

    private func refuse(_ route: String) -> TransportError {
        TransportError(.rejected, request: route, message: "a health endpoint only")
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { throw refuse("POST /push") }
    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse { throw refuse("POST /pull") }
    func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        throw refuse("GET /media")
    }
    func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus { throw refuse("PUT /media") }
    func downloadBundle(project: UUID, format: BundleFormat, to destination: URL) async throws(TransportError) -> Int64 {
        throw refuse("GET /bundle")
    }
    func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        throw refuse("GET /media")
    }
    var transferred: TransferCounts { TransferCounts() }
}

@Suite(.fieldService) struct ConnectivityMonitorTests {
    @Test func aHealthyServerIsOnlineWithAGoodConnection() async throws {
        let monitor = ConnectivityMonitor(transport: HealthEndpoint(assignsServerIDs: true), clock: ManualClock())
        #expect(await monitor.status == .unknown)
        #expect(await monitor.checkNow() == .online(.good))
        #expect(await monitor.lastHealth?.assignsServerIDs == true)
    }

    @Test func unreachableMeansOfflineButARefusalStillMeansOnline() async throws {
        let server = HealthEndpoint()
        let monitor = ConnectivityMonitor(transport: server, clock: ManualClock())
        for failure in [InjectedFailure.dropRequest, .dropResponse, .serverError(status: 503)] {
            await server.inject(failure)
            #expect(await monitor.checkNow() == .offline, "\(failure)")
        }
        await server.inject(.unauthorized)
        #expect(await monitor.checkNow().isOnline)
    }

    @Test func periodicChecksFollowTheInjectedClockAndPublishChanges() async throws {
        let server = HealthEndpoint()
        let clock = ManualClock()
        let monitor = ConnectivityMonitor(
            transport: server, clock: clock, checkInterval: .seconds(30), offlineCheckInterval: .seconds(10))
        let changes = await monitor.statusChanges()
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() == .unknown)

        await monitor.start()
        #expect(await iterator.next() == .online(.good))
        #expect(await eventually { clock.sleeperCount == 1 })
        clock.advance(by: .seconds(29))
        #expect(clock.sleeperCount == 1)
        #expect(await server.requests == 1)

        await server.inject(.dropRequest)
        clock.advance(by: .seconds(1))
        #expect(await iterator.next() == .offline)
        #expect(await eventually { clock.sleeperCount == 1 })
        #expect(await server.requests == 2)

        // Offline, the next check comes after the shorter interval, and the return is published.
        clock.advance(by: .seconds(10))
        #expect(await iterator.next() == .online(.good))
        #expect(await server.requests == 3)
        await monitor.stop()
        #expect(await iterator.next() == nil)
    }

    @Test func measuredThroughputLowersTheQualityAndHoldsMediaBack() async throws {
        let monitor = ConnectivityMonitor(transport: HealthEndpoint(), clock: ManualClock())
        await monitor.checkNow()
        #expect(await monitor.allowsMedia(conditions: SyncConditions()))
        await monitor.recordTransfer(bytes: 1_000_000, duration: .seconds(10))
        #expect(await monitor.status == .online(.fair))
        #expect(await !monitor.allowsMedia(conditions: SyncConditions()))
        #expect(await monitor.allowsMedia(conditions: SyncConditions(mediaRequested: true)))
        for _ in 0..<5 { await monitor.recordTransfer(bytes: 4_000_000, duration: .seconds(4)) }
        #expect(await monitor.status == .online(.good))
    }

    @Test func qualityThresholds() {
        func quality(latencies: [Int], transfer: (Int64, Duration)? = nil) -> ConnectionQuality {
            var estimator = QualityEstimator()
            for latency in latencies { estimator.record(bytes: 200, duration: .milliseconds(latency)) }
            if let (bytes, duration) = transfer { estimator.record(bytes: bytes, duration: duration) }
            return estimator.quality
        }
        #expect(quality(latencies: [100, 400, 120]) == .good)
        #expect(quality(latencies: [100, 3000, 120]) == .good, "one slow request does not flip the median")
        #expect(quality(latencies: [500, 600, 700]) == .fair)
        #expect(quality(latencies: [1600, 2000, 100]) == .poor)
        #expect(quality(latencies: [100], transfer: (3_000_000, .seconds(10))) == .good)
        #expect(quality(latencies: [100], transfer: (1_000_000, .seconds(10))) == .fair)
        #expect(quality(latencies: [100], transfer: (100_000, .seconds(10))) == .poor)
    }

    @Test func mediaNeedsAGoodUnmeteredConnectionUnlessTheUserAsks() {
        let good = ConnectivityStatus.online(.good)
        #expect(good.allowsMedia(conditions: SyncConditions()))
        #expect(!good.allowsMedia(conditions: SyncConditions(isMetered: true)))
        #expect(!good.allowsMedia(conditions: SyncConditions(isLowBattery: true)))
        #expect(good.allowsMedia(conditions: SyncConditions(isMetered: true, mediaRequested: true)))
        #expect(!ConnectivityStatus.online(.fair).allowsMedia(conditions: SyncConditions()))
        #expect(ConnectivityStatus.online(.poor).allowsMedia(conditions: SyncConditions(mediaRequested: true)))
        #expect(!ConnectivityStatus.offline.allowsMedia(conditions: SyncConditions(mediaRequested: true)))
        #expect(!ConnectivityStatus.unknown.allowsMedia(conditions: SyncConditions()))
    }
}
