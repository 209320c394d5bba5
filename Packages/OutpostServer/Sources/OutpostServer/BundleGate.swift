import Foundation

/// Bounds how many bundle downloads stream at once, in all and per caller. Each holds a database
/// snapshot for as long as its client reads (a pooled connection on PostgreSQL), so without a bound a
/// few stalled clients could take every connection that pushes, pulls and token checks need; without
/// one per caller, one member who opens downloads and never reads them takes every place from everyone
/// else. A download over either bound is refused with 503 and Retry-After, which clients already treat
/// as "try again shortly".
final class BundleGate: @unchecked Sendable {
    // @unchecked: `open` and `openByCaller` are only touched under `lock`.
    private let lock = NSLock()
    private var open = 0
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
        openByCaller[caller, default: 0] += 1
        return Slot(gate: self, caller: caller)
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
    final class Slot: Sendable {
        private let gate: BundleGate
        private let caller: UUID

        fileprivate init(gate: BundleGate, caller: UUID) {
            self.gate = gate
            self.caller = caller
        }

        deinit {
            gate.leave(caller)
        }
    }
}
