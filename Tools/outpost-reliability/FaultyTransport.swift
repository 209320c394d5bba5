import Foundation
import OutpostFieldService
import OutpostSync
import OutpostTesting
import OutpostWire

/// The faults a `FaultyTransport` plays, each by seeded chance per request.
enum Fault: String, CaseIterable, Sendable, Codable {
    /// Never sent: the device sees no connection and the server sees nothing.
    case dropRequest
    /// Sent and handled by the server, then the answer is lost: the device sees a timeout.
    case dropResponse
    /// Sent after a short pause.
    case delay
    /// Sent twice (a retransmission); the device sees the second answer.
    case duplicate
    /// Answered 500 `internal` without being sent.
    case internalError
    /// Answered 503 `unavailable` without being sent.
    case unavailable
    /// Answered 429 `rate_limited` without being sent.
    case rateLimited
}

/// How often each fault is played, as a probability per request.
struct FaultPlan: Sendable {
    var chances: [(Fault, Double)]

    /// No faults: the reference run.
    static let none = FaultPlan(chances: [])

    /// About four requests in ten meet a fault; every fault appears.
    static let standard = FaultPlan(chances: [
        (.dropRequest, 0.10), (.dropResponse, 0.10), (.delay, 0.05), (.duplicate, 0.08),
        (.internalError, 0.03), (.unavailable, 0.03), (.rateLimited, 0.03),
    ])

    /// Picks the fault for one request (nil: none), consuming exactly one random number.
    func draw(using generator: inout SeededGenerator) -> Fault? {
        let roll = Double(generator.next() >> 11) * 0x1p-53
        var threshold = 0.0
        for (fault, chance) in chances {
            threshold += chance
            if roll < threshold { return fault }
        }
        return nil
    }
}

/// A `SyncTransport` that wraps a real `HTTPTransport` and, per request, by seeded chance, drops the
/// request, drops the answer after the server handled it, delays it, sends it twice, or answers a
/// synthetic 500/503/429 without sending it. The schedule follows from the seed alone.
actor FaultyTransport: ForwardingTransport {
    let base: HTTPTransport
    private let plan: FaultPlan
    private var random: SeededGenerator
    /// Faults played so far, by kind.
    private(set) var injected: [Fault: Int] = [:]

    init(base: HTTPTransport, plan: FaultPlan, seed: UInt64) {
        self.base = base
        self.plan = plan
        self.random = SeededGenerator(seed: seed)
    }

    /// Whether the runs now play no faults but lose every push's answer (`losePushAnswers`).
    private var losingPushAnswers = false
    /// Push answers lost that way so far.
    private(set) var pushAnswersLost = 0

    /// How many faults were played in all.
    var injectedCount: Int { injected.values.reduce(0, +) }

    /// From now on (`true`) until told otherwise, no fault is drawn, and every push the server takes
    /// whole has its answer lost: the convergence scenario's device whose change the server takes
    /// without the device learning it, while others sync on top of it.
    func losePushAnswers(_ losing: Bool) {
        losingPushAnswers = losing
    }

    func health() async throws(TransportError) -> HealthResponse {
        try await perform("GET /health") { () async throws(TransportError) in try await self.base.health() }
    }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        if losingPushAnswers {
            // Only an answer whose every change the server took: a conflict's answer reaches the device,
            // which merges and sends again (taken, with that answer lost), as the model's sync takes it.
            let response = try await base.push(request)
            guard response.results.allSatisfy({ if case .applied = $0.outcome.unwrapped { true } else { false } }) else {
                return response
            }
            injected[.dropResponse, default: 0] += 1
            pushAnswersLost += 1
            throw TransportError(.timedOut, request: "POST /push", message: "injected: the answer was lost")
        }
        return try await perform("POST /push") { () async throws(TransportError) in try await self.base.push(request) }
    }

    func pushAnswers(_ request: PushAnswersRequest) async throws(TransportError) -> PushResponse {
        try await perform("POST /push/answers") { () async throws(TransportError) in try await self.base.pushAnswers(request) }
    }

    func pull(_ request: PullRequest) async throws(TransportError) -> PullResponse {
        try await perform("POST /pull") { () async throws(TransportError) in try await self.base.pull(request) }
    }

    func mediaUploadStatus(for attachmentID: UUID) async throws(TransportError) -> MediaUploadStatus {
        try await perform("GET /media") { () async throws(TransportError) in
            try await self.base.mediaUploadStatus(for: attachmentID)
        }
    }

    func uploadMedia(_ chunk: MediaChunk) async throws(TransportError) -> MediaUploadStatus {
        try await perform("PUT /media") { () async throws(TransportError) in try await self.base.uploadMedia(chunk) }
    }

    func downloadBundle(project: UUID, format: BundleFormat, to destination: URL) async throws(TransportError) -> Int64 {
        try await perform("GET /bundle") { () async throws(TransportError) in
            try await self.base.downloadBundle(project: project, format: format, to: destination)
        }
    }

    func downloadOriginal(of attachmentID: UUID, byteCount: Int64, appendingTo partial: URL)
        async throws(TransportError) -> OriginalDownload
    {
        try await perform("GET /media") { () async throws(TransportError) in
            try await self.base.downloadOriginal(of: attachmentID, byteCount: byteCount, appendingTo: partial)
        }
    }

    private func perform<Answer: Sendable>(
        _ route: String, _ send: @Sendable () async throws(TransportError) -> Answer
    ) async throws(TransportError) -> Answer {
        guard !losingPushAnswers, let fault = plan.draw(using: &random) else { return try await send() }
        injected[fault, default: 0] += 1
        switch fault {
        case .dropRequest:
            throw TransportError(.noConnection, request: route, message: "injected: the request never left")
        case .dropResponse:
            _ = try await send()
            throw TransportError(.timedOut, request: route, message: "injected: the answer was lost")
        case .delay:
            let pause = Int(random.next() % 15) + 1
            try? await Task.sleep(for: .milliseconds(pause))
            return try await send()
        case .duplicate:
            _ = try? await send()
            return try await send()
        case .internalError:
            throw TransportError(
                .serverFailure, request: route, status: 500, serverCode: .internal, message: "injected: 500")
        case .unavailable:
            throw TransportError(
                .serverFailure, request: route, status: 503, serverCode: .unavailable, message: "injected: 503",
                retryAfter: .seconds(1))
        case .rateLimited:
            throw TransportError(
                .rateLimited, request: route, status: 429, serverCode: .rateLimited, message: "injected: 429",
                retryAfter: .seconds(2))
        }
    }
}
