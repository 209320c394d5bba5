@testable import OutpostSync
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServerTesting
import OutpostTesting
import OutpostWire
import Testing

@Suite(.fieldService) struct RetryPolicyTests {
    let policy = RetryPolicy()

    private func error(_ code: TransportError.Code, serverCode: ServerErrorCode? = nil, retryAfter: Duration? = nil)
        -> TransportError
    {
        TransportError(code, request: "POST /push", serverCode: serverCode, message: "test", retryAfter: retryAfter)
    }

    @Test func nominalScheduleDoublesFromOneSecondToASixtySecondCap() {
        let schedule = (1...10).map { policy.nominalDelay(beforeRetry: $0) }
        #expect(schedule == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60].map { Duration.seconds($0) })
        #expect(policy.nominalDelay(beforeRetry: 500) == .seconds(60))
    }

    @Test func equalJitterSpansHalfToAllOfTheNominalDelay() {
        var low = FixedGenerator(value: 0)
        var high = FixedGenerator(value: .max)
        #expect((1...8).map { policy.delay(beforeRetry: $0, using: &low) }
            == [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000].map { Duration.milliseconds($0) })
        #expect((1...8).map { policy.delay(beforeRetry: $0, using: &high) }
            == [999, 1999, 3999, 7999, 15_999, 31_999, 59_999, 59_999].map { Duration.milliseconds($0) })
    }

    @Test(arguments: [1, 42, 0xdead_beef] as [UInt64])
    func jitterStaysInRangeAndReplaysFromItsSeed(seed: UInt64) {
        var first = SeededGenerator(seed: seed)
        var second = SeededGenerator(seed: seed)
        for retry in 1...200 {
            let nominal = policy.nominalDelay(beforeRetry: min(retry, 12))
            let delay = policy.delay(beforeRetry: min(retry, 12), using: &first)
            #expect(delay >= nominal / 2 && delay <= nominal, "seed \(seed), retry \(retry): \(delay)")
            #expect(policy.delay(beforeRetry: min(retry, 12), using: &second) == delay, "seed \(seed)")
        }
    }

    @Test func retryAfterIsHonouredButBounded() {
        var generator = FixedGenerator(value: 0)
        #expect(policy.delay(beforeRetry: 1, retryAfter: .seconds(90), using: &generator) == .seconds(90))
        #expect(policy.delay(beforeRetry: 1, retryAfter: .seconds(86_400), using: &generator) == .seconds(3600))
        #expect(policy.delay(beforeRetry: 7, retryAfter: .seconds(5), using: &generator) == .seconds(30))
    }

    @Test func failuresAreClassifiedIntoRetryFailOrPause() {
        var generator = FixedGenerator(value: 0)
        func decide(_ error: TransportError, attempts: Int = 1) -> RetryDecision {
            policy.decision(after: error, failedAttempts: attempts, using: &generator)
        }
        for code in [TransportError.Code.noConnection, .timedOut, .serverFailure, .invalidResponse] {
            #expect(decide(error(code), attempts: 3) == .retry(after: .seconds(2)), "\(code)")
        }
        #expect(decide(error(.rateLimited, retryAfter: .seconds(20))) == .retry(after: .seconds(20)))
        let invalid = error(.rejected, serverCode: .invalidRequest)
        #expect(decide(invalid) == .fail(invalid))
        #expect(decide(error(.forbidden)) == .fail(error(.forbidden)))
        #expect(decide(error(.unauthorized), attempts: 50) == .pauseUntilCredentialsRenewed)
        #expect(decide(error(.unsupportedVersion, serverCode: .unsupportedSchemaVersion)) == .pauseUntilAppUpdated)
        #expect(decide(error(.rejected, serverCode: .rangeMismatch)) == .retry(after: .zero))
    }

    @Test func theFailureAfterTheLastRetryFailsTheMutation() {
        var generator = FixedGenerator(value: 0)
        let policy = RetryPolicy(retryLimit: 3)
        let timeout = error(.timedOut)
        #expect(policy.decision(after: timeout, failedAttempts: 3, using: &generator) == .retry(after: .seconds(2)))
        #expect(policy.decision(after: timeout, failedAttempts: 4, using: &generator) == .fail(timeout))
    }

    /// The engine's loop in miniature: transient failures back off on the schedule, timed by an
    /// injected clock that jumps instead of sleeping.
    @Test func backoffAgainstAFlakyServerFollowsTheSchedule() async throws {
        let server = try await InProcessServer()
        await server.inject(.dropRequest, on: .push, times: 3)
        await server.inject(.serverError(status: 503, retryAfter: .seconds(12)), on: .push)
        await server.inject(.dropResponse, on: .push)
        let clock = ManualClock(advancesOnSleep: true)
        var generator = FixedGenerator(value: .max)
        let issue = OutpostModels.Issue(projectID: try await server.newProject(), title: "Leak")
        let stamp = HybridTimestamp(physicalMilliseconds: 1_795_000_000_000, counter: 0, node: NodeID(0x0FF1CE))
        let push = PushRequest(mutations: [PushMutation(
            idempotencyKey: UUID(), operation: .create, change: VersionedRecord(record: issue.record, stampedAt: stamp),
            baseVersion: 0)])
        var failed = 0
        var response: PushResponse?
        while response == nil {
            do throws(TransportError) {
                response = try await server.push(push)
            } catch {
                failed += 1
                guard case .retry(let delay) = policy.decision(after: error, failedAttempts: failed, using: &generator)
                else {
                    Issue.record("unexpected decision for \(error)")
                    return
                }
                try await clock.sleep(for: delay)
            }
        }
        #expect(clock.sleeps == [999, 1999, 3999, 12_000, 15_999].map { Duration.milliseconds($0) })
        #expect(clock.now.offset == .milliseconds(34_996))
        // The dropped response had been applied: the retry is answered as a duplicate, not applied twice.
        #expect(response?.results.first?.outcome.status == "duplicate")
        #expect(response?.results.first?.outcome.unwrapped == .applied(version: 1, serverID: nil))
    }
}
