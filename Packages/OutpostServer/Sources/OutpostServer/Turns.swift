import Foundation
import NIOConcurrencyHelpers

/// Turns at some work, per key: at most `limit` holders of one key at once, the others waiting in the
/// order they came. The server's one semaphore: bundle encoding takes its turns under a single key
/// (`EncodingTurns`), a user's pushes and pulls under the user's id (`SyncServer.requestTurns`).
final class Turns<Key: Hashable & Sendable>: Sendable {
    private struct Line {
        var working = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private struct State {
        var lines: [Key: Line] = [:]
        var peak = 0
    }

    private let state = NIOLockedValueBox(State())
    /// How many turns of one key are taken at once, at most.
    let limit: Int

    init(limit: Int) {
        precondition(limit > 0, "at least one turn")
        self.limit = limit
    }

    /// `work`'s result, once it has run in a turn of `key`'s: after any earlier waiters of that key, never
    /// beside `limit` others of it.
    func run<Result>(for key: Key, _ work: () throws -> Result) async rethrows -> Result {
        await take(for: key)
        defer { give(for: key) }
        return try work()
    }

    /// As `run`, for work that suspends (a request's database work).
    func inTurn<Result>(of key: Key, _ work: () async throws(ServerError) -> Result) async throws(ServerError) -> Result {
        await take(for: key)
        defer { give(for: key) }
        return try await work()
    }

    /// As `inTurn`, but only when a turn of `key`'s is free now and no one waits for one; nil, without
    /// running `work`, otherwise. For work that a holder of one of `key`'s turns may wait for (a page
    /// read ahead, which its pull awaits in its turn): waiting for a turn there waited for ever once
    /// every turn was held by a pull awaiting such work (attack 128, F1).
    func inTurnIfFree<Result>(of key: Key, _ work: () async throws(ServerError) -> Result) async throws(ServerError) -> Result? {
        guard state.withLockedValue({ claim(key, in: &$0) }) else { return nil }
        defer { give(for: key) }
        return try await work()
    }

    /// The most turns of one key ever taken at once (for tests).
    var peak: Int { state.withLockedValue(\.peak) }

    /// How many turns of `key`'s are taken now, and how many wait for one (for tests).
    func line(of key: Key) -> (working: Int, waiting: Int) {
        state.withLockedValue { ($0.lines[key]?.working ?? 0, $0.lines[key]?.waiting.count ?? 0) }
    }

    /// Every key with a turn taken or awaited now: how many of each (for a test's report of a request
    /// that never came back).
    var lines: [(key: Key, working: Int, waiting: Int)] {
        state.withLockedValue { $0.lines.map { ($0.key, $0.value.working, $0.value.waiting.count) } }
    }

    private func take(for key: Key) async {
        // Checked and queued under one lock, so a turn given back in between is not missed.
        await withCheckedContinuation { (turn: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state in
                if claim(key, in: &state) { return true }
                state.lines[key, default: Line()].waiting.append(turn)
                return false
            }
            if now { turn.resume() }
        }
    }

    /// Takes a turn of `key`'s in `state` when one is free, under the caller's lock. No one waits while
    /// one is free: `give` hands a turn straight to the longest waiter.
    private func claim(_ key: Key, in state: inout State) -> Bool {
        guard state.lines[key, default: Line()].working < limit else { return false }
        state.lines[key, default: Line()].working += 1
        state.peak = max(state.peak, state.lines[key, default: Line()].working)
        return true
    }

    private func give(for key: Key) {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard var line = state.lines[key] else { return nil }
            defer { state.lines[key] = line.working > 0 ? line : nil }
            // Handed straight to the longest waiter: `working` stays as it is.
            guard line.waiting.isEmpty else { return line.waiting.removeFirst() }
            line.working -= 1
            return nil
        }
        next?.resume()
    }
}
