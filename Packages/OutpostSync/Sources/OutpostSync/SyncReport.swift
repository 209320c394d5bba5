import Foundation
import OutpostStore
import OutpostWire

/// What one sync run did, for the status bar and for logs.
public struct SyncReport: Sendable {
    /// Mutations found in flight and put back in line: after a crash (an engine's first run), or a batch
    /// an earlier run of this engine could not put back because the store refused the write.
    public var recovered = 0
    /// Records received from the server and applied.
    public var pulled = 0
    /// Mutations the server acknowledged.
    public var pushed = 0
    /// Mutations that met a newer server version, were merged and go again on top of it.
    public var rebased = 0
    /// Mutations that failed for now and wait for their next attempt.
    public var retried = 0
    /// Mutations refused for good or out of retries, shown to the user.
    public var failed = 0
    /// Mutations that can no longer go because one they depend on failed.
    public var blocked = 0
    /// Values or deletes that lost a conflict and were surfaced.
    public var conflictsSurfaced = 0
    /// Records flagged orphaned by what was pulled.
    public var orphaned = 0
    /// Pulled records skipped because they do not fit the catalog or could not be converted (the rest of
    /// their page applied); `LocalStore.quarantinedRecords()` lists them.
    public var quarantined = 0
    /// Whether every page was fetched.
    public var pullCompleted = false
    /// Of this run's pull, on the engine's clock (the one its budgets use), the time spent waiting for
    /// the next page: the server reading and sending it, the network, and this device decoding it
    /// (decoding runs while the page before is applied, and counts only as far as it holds the pull up).
    /// A slow pull that mostly waits is held up there.
    public var pullWaiting: Duration = .zero
    /// Of this run's pull, the time spent applying pages to the store (`LocalStore.applyPulledPage`),
    /// one after another on its writer. A slow pull that mostly applies is held up by this device: a
    /// 100,000-record pull from a server on the same two-core host applied for 87–91% of its time.
    public var pullApplying: Duration = .zero
    /// Whether nothing was left ready to send.
    public var pushCompleted = false
    /// Whether the time budget ended the run: no batch started after it, and what was in flight was cancelled.
    public var stoppedForBudget = false
    /// True when the call found another run under way and did nothing (that run covers it).
    public var alreadyRunning = false
    /// Set when sending is on hold.
    public var pause: SyncPause?
    /// Changes the server refused as stamped too far ahead, stamped again by this device's corrected
    /// clock and sent again (`LocalStore.restampRefusedClocks`).
    public var restamped = 0
    /// Changes the server refused as stamped too far ahead while this device's clock still runs ahead:
    /// kept in line, and no more sent in this run (`StoreStatus.clockWarning` says why).
    public var heldForClock = 0
    /// With `SyncPause.conflictPolicyMismatch`: each entity the app and the server settle differently.
    public var conflictPolicyDifferences: [String] = []
    /// Projects the server said, in this run, that the user was taken off: their records stay on the
    /// device and their unsent changes wait for the user to hand them over (`StoreStatus.leftProjects`).
    public var leftProjects: [UUID] = []
    /// The last transport failure met, if any (offline, timeout, refused).
    public var lastTransportError: TransportError?
    /// Original files whose upload completed in this run.
    public var mediaUploaded = 0
    /// Bytes of media sent in this run.
    public var mediaBytesUploaded: Int64 = 0
    /// Uploads the server refused for good, or whose file is gone.
    public var mediaFailed = 0
    /// Uploads waiting that this run held back (connection not judged good, metered, low battery).
    public var mediaHeldBack = 0
    /// Whether the server answered `history_changed` (restored from a backup taken before this device
    /// last heard from it), or refused the device's stored cursor or checkpoint as text it never wrote
    /// (`unknown_cursor`, `unknown_checkpoint`: damaged on the device), and this run rebuilt the replica
    /// from the server's history.
    public var historyChanged = false
    /// This device's own writes the restored server no longer held, found by the rebuild's pages and
    /// queued again (each merged by its entity's strategy first; whatever lost is surfaced).
    public var resent = 0
    /// What the end of the rebuild did with records the restored server no longer holds: this device's
    /// own queued again as creates, the others removed. Nil unless a rebuild ended in this run.
    public var rebuilt: HistoryRebuildReport?
    /// Records bundle files brought that a read of their whole project did not: the server does not
    /// hold them, or this device's user may not see them (`LocalStore.settleRereadImports(asked:)`).
    /// Removed, or queued again as creates where this device wrote to them. Zero when none.
    public var unheldImports = HistoryRebuildReport()
    /// Bytes sent and received during the run.
    public var bytesSent: Int64 = 0
    public var bytesReceived: Int64 = 0
    var storeError: StoreError?

    /// Whether the run fetched everything and sent everything that was ready.
    public var isComplete: Bool { pullCompleted && pushCompleted && pause == nil }

    func throwStoreError() throws(StoreError) {
        if let storeError { throw storeError }
    }

    /// Counts what the replica did settling a batch.
    mutating func add(_ settlement: Settlement) {
        pushed += settlement.acknowledged
        rebased += settlement.rebased
        retried += settlement.retried
        failed += settlement.failed
        blocked += settlement.blocked
        conflictsSurfaced += settlement.conflictsSurfaced
        restamped += settlement.restamped
        heldForClock += settlement.heldForClock
    }
}
