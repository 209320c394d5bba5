@testable import OutpostServer
import Foundation
import OutpostTesting
import OutpostWire
import Testing

/// Bundle downloads take turns to encode, so they never take every core from the rest of the server
/// (attack 55: eight large gzip downloads kept `/health` answering 503 and pushes waiting 20–25 s).
struct EncodingTurnsTests {
    /// Counts the work running now, beside the turns' own count, so the law is checked by a witness the
    /// turns do not keep.
    final class Witness: @unchecked Sendable {
        private let lock = NSLock()
        private var running = 0
        private(set) var most = 0
        private(set) var done = 0

        func enter() {
            lock.lock()
            running += 1
            most = max(most, running)
            lock.unlock()
        }

        func leave() {
            lock.lock()
            running -= 1
            done += 1
            lock.unlock()
        }
    }

    struct Failed: Error {}

    @Test("Work never runs beside more than the turns' limit, every turn is given back, failing work too", arguments: 1...8)
    func turnsBoundTheWorkAtOnce(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let limit = Int.random(in: 1...3, using: &random)
        let turns = EncodingTurns(limit: limit)
        let witness = Witness()
        let plans = (0..<12).map { _ in
            (0..<Int.random(in: 1...6, using: &random)).map { _ in
                (spins: Int.random(in: 1_000...50_000, using: &random), fails: Int.random(in: 0..<5, using: &random) == 0)
            }
        }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for plan in plans {
                group.addTask {
                    var failures = 0
                    for step in plan {
                        do {
                            try await turns.run {
                                witness.enter()
                                defer { witness.leave() }
                                var sum = 0
                                for index in 0..<step.spins { sum &+= index &* index }
                                if step.fails || sum == -1 { throw Failed() }
                            }
                        } catch is Failed {
                            failures += 1
                        }
                    }
                    return failures
                }
            }
            var failures = 0
            for try await count in group { failures += count }
            #expect(failures == plans.joined().filter(\.fails).count, "seed \(seed)")
        }
        #expect(witness.done == plans.joined().count, "seed \(seed)")
        #expect(witness.most <= limit, "seed \(seed): \(witness.most) ran at once under a limit of \(limit)")
        #expect(turns.peak <= limit, "seed \(seed)")
        // Every turn came back: as many as the limit can be taken at once again.
        let again = Witness()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<limit { group.addTask { await turns.run { again.enter(); again.leave() } } }
        }
        #expect(again.done == limit, "seed \(seed)")
    }

    /// Six downloads at once (two per member, each of several pages), through the real server: every one
    /// whole, and never more batches encoding at once than the server's turns.
    @Test("Downloads at once take turns to encode and each is whole", arguments: Backend.available)
    func downloadsAtOnceTakeTurns(_ backend: Backend) async throws {
        let server = try await TestServer.start(backend)
        defer { Task { await server.stop() } }
        for (token, project) in [(TestServer.aliceToken, TestServer.projectA), (TestServer.bobToken, TestServer.projectB)] {
            let transport = server.transport(token: token)
            for _ in 0..<3 {
                let batch = (0..<400).map { _ in Sample.create(.issue, fields: Sample.issueFields(project: project)) }
                #expect(try await transport.push(PushRequest(mutations: batch)).results.allSatisfy { $0.outcome.appliedVersion == 1 })
            }
        }
        let downloads: [(token: String, project: UUID, gzip: Bool)] = [
            (TestServer.aliceToken, TestServer.projectA, true), (TestServer.aliceToken, TestServer.projectA, false),
            (TestServer.bobToken, TestServer.projectB, true), (TestServer.bobToken, TestServer.projectB, false),
            (TestServer.carolToken, TestServer.projectA, true), (TestServer.carolToken, TestServer.projectB, false),
        ]
        let counts = try await withThrowingTaskGroup(of: Int?.self) { group in
            for download in downloads {
                group.addTask {
                    let answer = try await server.send(
                        "GET", "/projects/\(download.project.uuidString.lowercased())/bundle?format=json", token: download.token,
                        headers: ["Accept-Encoding": download.gzip ? "gzip" : "identity"])
                    guard answer.status == 200 else { return nil }
                    return ((try JSONSerialization.jsonObject(with: answer.body) as? NSDictionary)?["records"] as? NSArray)?.count
                }
            }
            var counts: [Int?] = []
            for try await count in group { counts.append(count) }
            return counts
        }
        // 1,200 issues and the project's own records (the project, its members).
        #expect(counts.count == 6)
        #expect(counts.allSatisfy { ($0 ?? 0) >= 1_200 }, "\(counts)")
        #expect(server.server.bundleEncoding.peak >= 1)
        #expect(server.server.bundleEncoding.peak <= EncodingTurns.forThisMachine)
    }
}
