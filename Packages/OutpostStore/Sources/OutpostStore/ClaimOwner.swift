import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Who holds a mutation's claim: a store in a process on a host (`pid:host:instance`). Several
/// processes of one app (the app, its share extension, widgets) open one database file; each store
/// claims under its own owner, so a claim can be told apart from the claimant's own, and a claim
/// whose process is gone can be taken at once instead of after its lease.
struct ClaimOwner: Hashable {
    let text: String

    /// A new owner for a store opened in this process, live until `release`.
    static func current() -> ClaimOwner {
        let owner = ClaimOwner(text: "\(getpid()):\(hostName):\(UUID().uuidString.prefix(8).lowercased())")
        live.insert(owner.text)
        return owner
    }

    /// The store went away (closed, or dropped as a crash would): its claims are free at once.
    func release() { Self.live.remove(text) }

    /// The owners of this process's open stores: a claim of this process names one of them or is left
    /// over from a store that is gone.
    private static let live = LiveOwners()

    /// This host's name, read once: owners on another host (a file on a shared folder) are never judged gone.
    private static let hostName = ProcessInfo.processInfo.hostName

    /// Whether the process `text` names has certainly exited: on this host, and no process has its id.
    /// Anything unreadable, another host's, or a process this one may not signal counts as alive, so
    /// the claim waits for its lease.
    static func isGone(_ text: String) -> Bool {
        let parts = text.split(separator: ":", maxSplits: 2)
        guard parts.count == 3, parts[1] == hostName, let pid = pid_t(parts[0]), pid > 0 else { return false }
        if pid == getpid() { return !live.contains(text) }
        return processIsGone(pid)
    }

    /// Whether another process `pid` of this host has certainly exited (no process has its id).
    static func processIsGone(_ pid: pid_t) -> Bool {
        pid > 0 && pid != getpid() && kill(pid, 0) == -1 && errno == ESRCH
    }
}

/// The set behind `ClaimOwner.live`, behind a lock (as `StoreObservers`: `Mutex` needs macOS 15).
private final class LiveOwners: @unchecked Sendable {
    private let lock = NSLock()
    private var owners: Set<String> = []

    func insert(_ owner: String) { lock.withLock { _ = owners.insert(owner) } }
    func remove(_ owner: String) { lock.withLock { _ = owners.remove(owner) } }
    func contains(_ owner: String) -> Bool { lock.withLock { owners.contains(owner) } }
}
