import Foundation

/// Bounds how many bundle downloads stream at once, in all and per caller. Each holds a database
/// snapshot while it encodes (a pooled connection on PostgreSQL; longer when its client is more than
/// `BundleDownload.spoolAheadBytes` behind), a spool file and a connection for as long as its client
/// reads, so without a bound a few stalled clients could take every connection that pushes, pulls and
/// token checks need; without
/// one per caller, one member who opens downloads and never reads them takes every place from everyone
/// else. A download over either bound is refused with 503 and Retry-After, which clients already treat
/// as "try again shortly".
final class BundleGate: @unchecked Sendable {
    // @unchecked: `open` and `openByCaller` are only touched under `lock`.
    private let lock = NSLock()
    private var open = 0
    private var reading = 0
    private var openByCaller: [UUID: Int] = [:]
    let limit: Int
    let limitPerCaller: Int

    init(limit: Int, limitPerCaller: Int) {
        self.limit = limit
        self.limitPerCaller = limitPerCaller
    }

    /// A slot for one download of `caller`, nil when `limit` are streaming or `caller` has
    /// `limitPerCaller` of them; the slot frees itself when released.
    func enter(for caller: UUID) -> Slot? {
        lock.lock()
        defer { lock.unlock() }
        guard open < limit, openByCaller[caller, default: 0] < limitPerCaller else { return nil }
        open += 1
        reading += 1
        openByCaller[caller, default: 0] += 1
        return Slot(gate: self, caller: caller)
    }

    /// Downloads still reading their project from a database snapshot (the rest send what their
    /// spool holds, at their client's pace): what keeps SQLite's WAL from being checkpointed.
    var readingSnapshots: Int {
        lock.lock()
        defer { lock.unlock() }
        return reading
    }

    private func doneReading() {
        lock.lock()
        reading -= 1
        lock.unlock()
    }

    /// Downloads streaming now.
    var streaming: Int {
        lock.lock()
        defer { lock.unlock() }
        return open
    }

    private func leave(_ caller: UUID) {
        lock.lock()
        open -= 1
        let left = openByCaller[caller, default: 1] - 1
        openByCaller[caller] = left > 0 ? left : nil
        lock.unlock()
    }

    /// One download's place: freed when the last reference goes (the response body ended, failed, or
    /// was never sent), so no path can keep it.
    final class Slot: @unchecked Sendable {
        // @unchecked: `reading` is only touched under `lock`.
        private let gate: BundleGate
        private let caller: UUID
        private let lock = NSLock()
        private var reading = true

        fileprivate init(gate: BundleGate, caller: UUID) {
            self.gate = gate
            self.caller = caller
        }

        /// The download has read its last record (or stopped reading): it is no longer counted in
        /// `readingSnapshots`. Once only.
        func doneReading() {
            lock.lock()
            let was = reading
            reading = false
            lock.unlock()
            if was { gate.doneReading() }
        }

        deinit {
            doneReading()
            gate.leave(caller)
        }
    }
}

/// Bounds how many bundle downloads encode at once: one fewer than the cores, at least one. Encoding
/// and compressing a batch is a download's CPU work, done without a pause on a thread of the
/// cooperative pool, which has one thread per core; eight downloads within `BundleGate`'s bounds, of
/// text XML escapes to five times its size and gzip shrinks 680 to 1, kept both cores of a server busy
/// until `/health` answered 503 after 7–12 s and a push took 20–25 s (attack 55). A turn covers one
/// batch's synchronous work and never a send, so a stalled client holds none, and downloads take turns
/// in the order they asked.
struct EncodingTurns: Sendable {
    private let turns: Turns<Bool>
    /// Batches encoded at once, at most.
    var limit: Int { turns.limit }

    /// One fewer than this machine's cores, so one is always left for every other request.
    static var forThisMachine: Int { max(1, ProcessInfo.processInfo.activeProcessorCount - 1) }

    init(limit: Int = EncodingTurns.forThisMachine) {
        turns = Turns(limit: limit)
    }

    /// `work`'s result, once it has run in a turn: after any earlier waiters, never beside `limit` others.
    func run<Result>(_ work: () throws -> Result) async rethrows -> Result {
        try await turns.run(for: true, work)
    }

    /// The most turns that were ever taken at once (for tests).
    var peak: Int { turns.peak }
}
