import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

/// The convergence proof: the clock-based strategies are commutative, associative and idempotent, so
/// replicas that receive the same changes in any order, with duplicates, end identical.
@Suite(.fieldService) struct ConvergenceTests {
    static let cases = 1_000
    static let convergent: [(ConflictStrategy, whole: Bool)] = [(.fieldMerge, false), (.fieldMerge, true), (.lastWriteWins, true)]

    @Test(arguments: 0..<3)
    func commutative(_ index: Int) {
        let (strategy, whole) = Self.convergent[index]
        for seed in UInt64(0)..<UInt64(Self.cases) {
            var random = SeededGenerator(seed: seed)
            let a = Fixtures.randomVersion(&random, whole: whole)
            let b = Fixtures.randomVersion(&random, whole: whole)
            #expect(strategy.merge(a, b) == strategy.merge(b, a), "\(strategy) whole=\(whole) seed \(seed)")
        }
    }

    @Test(arguments: 0..<3)
    func associative(_ index: Int) {
        let (strategy, whole) = Self.convergent[index]
        for seed in UInt64(0)..<UInt64(Self.cases) {
            var random = SeededGenerator(seed: seed)
            let a = Fixtures.randomVersion(&random, whole: whole)
            let b = Fixtures.randomVersion(&random, whole: whole)
            let c = Fixtures.randomVersion(&random, whole: whole)
            let left = strategy.merge(strategy.merge(a, b), c)
            let right = strategy.merge(a, strategy.merge(b, c))
            #expect(left == right, "\(strategy) whole=\(whole) seed \(seed)")
        }
    }

    @Test(arguments: 0..<3)
    func idempotent(_ index: Int) {
        let (strategy, whole) = Self.convergent[index]
        for seed in UInt64(0)..<UInt64(Self.cases) {
            var random = SeededGenerator(seed: seed)
            let a = Fixtures.randomVersion(&random, whole: whole)
            let b = Fixtures.randomVersion(&random, whole: whole)
            #expect(strategy.merge(a, a) == a, "\(strategy) whole=\(whole) seed \(seed)")
            let once = strategy.merge(a, b)
            #expect(strategy.merge(once, b) == once, "\(strategy) whole=\(whole) seed \(seed)")
        }
    }

    /// Three replicas start from the same record and receive the same changes, each in its own random
    /// order with random duplicates, merging each as it arrives (sometimes as client, sometimes as server).
    @Test(arguments: 0..<3)
    func threeReplicasConverge(_ index: Int) {
        let (strategy, whole) = Self.convergent[index]
        for seed in UInt64(0)..<UInt64(Self.cases) {
            var random = SeededGenerator(seed: seed)
            let start = Fixtures.randomVersion(&random, whole: true)
            let changes = (0..<Int.random(in: 2...7, using: &random)).map { _ in
                Fixtures.randomVersion(&random, whole: whole)
            }
            var replicas = [start, start, start]
            for replica in replicas.indices {
                var deliveries = changes + (0..<Int.random(in: 0...4, using: &random)).map { _ in
                    changes.randomElement(using: &random)!
                }
                deliveries.shuffle(using: &random)
                for change in deliveries {
                    replicas[replica] = Bool.random(using: &random)
                        ? strategy.merge(change, replicas[replica]) : strategy.merge(replicas[replica], change)
                }
            }
            #expect(replicas[0] == replicas[1] && replicas[1] == replicas[2], "\(strategy) whole=\(whole) seed \(seed)")
        }
    }
}
