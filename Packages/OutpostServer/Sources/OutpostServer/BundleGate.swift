import Foundation

/// Bounds how many bundle downloads stream at once. Each holds a database snapshot for as long as its
/// client reads (a pooled connection on PostgreSQL), so without a bound a few stalled clients could take
/// every connection that pushes, pulls and token checks need. A download over the bound is refused with
/// 503 and Retry-After, which clients already treat as "try again shortly".
final class BundleGate: @unchecked Sendable {
    // @unchecked: `open` is only touched under `lock`.
    private let lock = NSLock()
    private var open = 0
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// A slot for one download, nil when `limit` are streaming; the slot frees itself when released.
    func enter() -> Slot? {
        lock.lock()
        defer { lock.unlock() }
        guard open < limit else { return nil }
        open += 1
        return Slot(gate: self)
    }

    /// Downloads streaming now.
    var streaming: Int {
        lock.lock()
        defer { lock.unlock() }
        return open
    }

    private func leave() {
        lock.lock()
        open -= 1
        lock.unlock()
    }

    /// One download's place: freed when the last reference goes (the response body ended, failed, or
    /// was never sent), so no path can keep it.
    final class Slot: Sendable {
        private let gate: BundleGate

        fileprivate init(gate: BundleGate) {
            self.gate = gate
        }

        deinit {
            gate.leave()
        }
    }
}
