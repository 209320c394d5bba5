import Foundation
import OutpostSchema
import OutpostTesting
import Synchronization
import Testing

/// The read-ahead pipeline's laws, for every pairing of a blocking or suspending producer with a
/// blocking or suspending consumer: every element arrives once and in order, at most `depth` are ever
/// produced and not yet taken, a failure arrives after the elements handed before it, and a stopped
/// consumer stops the producer.
@Suite struct ReadAheadTests {
    struct Failure: Error, Equatable {
        let after: Int
    }

    /// Counts produced-but-not-taken elements and remembers the most there ever were.
    final class Gauge: Sendable {
        private let state = Mutex((now: 0, most: 0))
        func produced() { state.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
        func taken() { state.withLock { $0.now -= 1 } }
        var most: Int { state.withLock { $0.most } }
    }

    /// Runs a producer of `count` elements (failing after them when `fails`) on a thread or a task.
    static func produce(
        _ count: Int, into pipeline: ReadAhead<Int, Failure>, gauge: Gauge, onThread: Bool, fails: Bool
    ) {
        if onThread {
            Thread {
                for value in 0..<count {
                    guard pipeline.roomBlocking() else { break }
                    gauge.produced()
                    pipeline.hand(value)
                }
                pipeline.end(throwing: fails ? Failure(after: count) : nil)
            }.start()
        } else {
            Task {
                for value in 0..<count {
                    guard await pipeline.room() else { break }
                    gauge.produced()
                    pipeline.hand(value)
                }
                pipeline.end(throwing: fails ? Failure(after: count) : nil)
            }
        }
    }

    /// Takes every element on a thread of its own, as the bundle import does.
    static func drainBlocking(_ pipeline: ReadAhead<Int, Failure>, gauge: Gauge) async -> ([Int], Failure?) {
        await withCheckedContinuation { continuation in
            Thread {
                var values: [Int] = []
                do throws(Failure) {
                    while let value = try pipeline.nextBlocking() {
                        gauge.taken()
                        values.append(value)
                    }
                    continuation.resume(returning: (values, nil))
                } catch {
                    continuation.resume(returning: (values, error))
                }
            }.start()
        }
    }

    static func drainSuspending(_ pipeline: ReadAhead<Int, Failure>, gauge: Gauge) async -> ([Int], Failure?) {
        var values: [Int] = []
        do throws(Failure) {
            while let value = try await pipeline.next() {
                gauge.taken()
                values.append(value)
                // Now and then the consumer is the slower side, so producers meet a full pipeline.
                if value % 7 == 0 { await Task.yield() }
            }
            return (values, nil)
        } catch {
            return (values, error)
        }
    }

    @Test(arguments: 0..<40)
    func everyElementArrivesOnceInOrderAndAtMostDepthWait(seed: Int) async {
        var random = SeededGenerator(seed: UInt64(0xAEAD + seed))
        let depth = Int.random(in: 1...5, using: &random)
        let count = Int.random(in: 0...300, using: &random)
        let producerOnThread = Bool.random(using: &random)
        let consumerBlocks = Bool.random(using: &random)
        let fails = Bool.random(using: &random)
        let pipeline = ReadAhead<Int, Failure>(depth: depth)
        let gauge = Gauge()
        Self.produce(count, into: pipeline, gauge: gauge, onThread: producerOnThread, fails: fails)
        let (values, failure) =
            consumerBlocks
            ? await Self.drainBlocking(pipeline, gauge: gauge) : await Self.drainSuspending(pipeline, gauge: gauge)
        let context = "seed \(seed): depth \(depth), \(count) elements, producer on a thread \(producerOnThread), consumer blocks \(consumerBlocks)"
        #expect(values == Array(0..<count), "\(context)")
        #expect(failure == (fails ? Failure(after: count) : nil), "\(context)")
        // The gauge sees an element taken only once the consumer records it, a moment after the
        // pipeline freed its room: one more than `depth` is that moment, not a leak.
        #expect(gauge.most <= depth + 1, "\(context): \(gauge.most) produced and not taken")
    }

    @Test(arguments: [1, 3, 8])
    func aConsumerThatTakesNothingHoldsTheProducerAtDepth(depth: Int) async throws {
        for onThread in [true, false] {
            let pipeline = ReadAhead<Int, Failure>(depth: depth)
            let gauge = Gauge()
            Self.produce(100, into: pipeline, gauge: gauge, onThread: onThread, fails: false)
            let started = ContinuousClock.now
            while gauge.most < depth, ContinuousClock.now - started < .seconds(60) {
                try await Task.sleep(for: .milliseconds(2))
            }
            try await Task.sleep(for: .milliseconds(50))
            #expect(gauge.most == depth, "producer on a thread \(onThread): nothing taken, nothing more made")
            #expect(try await pipeline.next() == 0)
            pipeline.stop()
        }
    }

    @Test func aStoppedConsumerStopsTheProducerAndStopAndWaitWaitsForItsEnd() async throws {
        for onThread in [true, false] {
            let pipeline = ReadAhead<Int, Failure>(depth: 2)
            let gauge = Gauge()
            Self.produce(1_000_000, into: pipeline, gauge: gauge, onThread: onThread, fails: false)
            #expect(try await pipeline.next() == 0)
            // Off the cooperative pool: stopAndWait blocks until the producer has ended.
            await withCheckedContinuation { continuation in
                Thread {
                    pipeline.stopAndWait()
                    continuation.resume()
                }.start()
            }
            #expect(await pipeline.room() == false, "no room once stopped")
            #expect(gauge.most <= 3)
        }
    }

    /// Elements of a weight (a pull page's bytes) wait ahead only until their weights reach the limit,
    /// however deep the pipeline: endless 19 MiB pages held a device about 216 MB with two pages ahead
    /// of the one applied and one arriving (attack 82). One element always goes, however heavy.
    @Test func elementsWaitAheadOnlyUntilTheirWeightsReachTheLimit() async throws {
        for onThread in [true, false] {
            let pipeline = ReadAhead<Int, Failure>(depth: 10, weightLimit: 100)
            let produced = Mutex(0)
            let producer = { @Sendable (value: Int) in
                produced.withLock { $0 += 1 }
                pipeline.hand(value, weight: 60)
            }
            if onThread {
                Thread {
                    var value = 0
                    while pipeline.roomBlocking() { producer(value); value += 1 }
                    pipeline.end()
                }.start()
            } else {
                Task {
                    var value = 0
                    while await pipeline.room() { producer(value); value += 1 }
                    pipeline.end()
                }
            }
            // However slow the host: wait for the count to reach what it must, then for it to stay.
            func settles(at count: Int) async throws -> Int {
                for _ in 0..<6_000 where produced.withLock({ $0 }) < count { try await Task.sleep(for: .milliseconds(20)) }
                try await Task.sleep(for: .milliseconds(200))
                return produced.withLock { $0 }
            }
            #expect(try await settles(at: 2) == 2, "60 waiting leaves room; 120 does not")
            #expect(try await pipeline.next() == 0)
            #expect(try await settles(at: 3) == 3, "one taken makes room for one")
            #expect(try await pipeline.next() == 1)
            #expect(try await pipeline.next() == 2)
            pipeline.stop()
        }
    }

    @Test func aCancelledConsumerWaitingForAnElementEndsWithNil() async {
        let pipeline = ReadAhead<Int, Failure>(depth: 1)
        let waiter = Task { try await pipeline.next() }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        let result = await waiter.result
        #expect((try? result.get()) == .some(nil), "nothing was handed; the cancelled wait ends like the end")
        pipeline.end()
    }
}
