import Foundation

/// A bundle file still being downloaded, for an import that reads it as it arrives
/// (`BundleImporter.open(_:arriving:)`): the downloader says how many bytes the file holds after each
/// write, then that it finished or failed; the import's reader waits at the end of what is there.
///
/// A pre-sync took the download's time and then the import's, one after the other (0.40 s and 0.46 s
/// for 20,000 records on loopback); reading while the bytes arrive overlaps them. An import holds the
/// store's write lock while it waits on the download, so `readyToImport()` lets it begin only once the
/// link has shown it is fast, or the file is whole.
public final class BundleArrival: @unchecked Sendable {
    /// What the file holds for a reader at some offset.
    enum Outcome {
        /// Bytes past the offset are in the file.
        case available
        /// The download finished: the file is whole, and its end is the document's.
        case ended
        /// The download failed, or the import stopped waiting: the document will not be whole.
        case failed(BundleError)
    }

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var written: Int64 = 0
    private var ended = false
    private var failure: BundleError?
    private var importMayStart = false
    private var importWaiters: [CheckedContinuation<Void, Never>] = []
    private var waited: Duration = .zero
    private var gaveWay = false
    /// When the first bytes were written, and how many: the link's rate is measured from there.
    private var firstWrite: (at: ContinuousClock.Instant, bytes: Int64)?
    private let fastAfterBytes: Int64
    private let fastBytesPerSecond: Double
    private let waitingBudget: Duration

    /// An arrival whose import may begin before the file is whole once the download has brought
    /// `fastAfterBytes` more than its first write held, at `fastBytesPerSecond` or more since. The wait
    /// for the server's first byte says nothing of the link's rate: counted from this arrival's creation,
    /// the 0.1 s a server took to open the project's snapshot held back every import until 0.2 s into a
    /// loopback download, a seventh of a 50,000-record pre-sync (issue 41). The
    /// defaults (1 MiB, at 16 MiB/s of the document) are below what the import reads per second, so an
    /// import begun then waits on the download about as long as it would have taken alone; on a slower
    /// link the import begins once the file is whole and holds the write lock no longer than before.
    ///
    /// A link can slow after a good start (the crew walks out of the office's Wi-Fi), and a hostile
    /// server can trickle bytes: an import that has waited `waitingBudget` in all for the download
    /// gives way (`importGaveWay`), failing and rolling back, and the caller imports the file once it
    /// is whole. So waiting on the link adds at most that to the time the import holds the write lock.
    public init(
        fastAfterBytes: Int64 = 1 << 20, fastBytesPerSecond: Double = 16 * 1_048_576, waitingBudget: Duration = .seconds(2)
    ) {
        self.fastAfterBytes = fastAfterBytes
        self.fastBytesPerSecond = fastBytesPerSecond
        self.waitingBudget = waitingBudget
    }

    /// Whether an import reading the file as it arrived gave way because the download was too slow:
    /// its failure says nothing of the bundle, and the whole file is to be imported once downloaded.
    public var importGaveWay: Bool {
        condition.lock()
        defer { condition.unlock() }
        return gaveWay
    }

    /// The file now holds `totalBytes` bytes of the document, written before this call.
    public func noteWritten(_ totalBytes: Int64) {
        update { arrival in
            arrival.written = max(arrival.written, totalBytes)
            let now = ContinuousClock.now
            let first = arrival.firstWrite ?? (now, arrival.written)
            arrival.firstWrite = first
            // The bytes after the first write, over the time since it: the first write's own bytes may
            // have taken any time to come (one inflated piece of a slow link is a megabyte).
            let since = arrival.written - first.bytes
            if !arrival.importMayStart, since >= arrival.fastAfterBytes,
                Double(since) >= arrival.fastBytesPerSecond * ((now - first.at) / .seconds(1))
            {
                arrival.importMayStart = true
            }
        }
    }

    /// The download finished: the file is whole.
    public func finish() {
        update { arrival in
            arrival.ended = true
            arrival.importMayStart = true
        }
    }

    /// The download failed with `error`: a reader waiting for more fails with it, as the cause of a
    /// `BundleError` saying the document was cut short. The first failure stays.
    public func fail(_ error: any Error & Sendable) {
        update { arrival in
            guard !arrival.ended, arrival.failure == nil else { return }
            arrival.failure = BundleError(
                .unreadableFile, message: "the bundle's download stopped after \(arrival.written) bytes: \(error)",
                underlying: error)
            arrival.importMayStart = true
        }
    }

    /// Returns once an import may begin: the download has shown it is fast, it finished, or it failed.
    public func readyToImport() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if importMayStart {
                condition.unlock()
                continuation.resume()
            } else {
                importWaiters.append(continuation)
                condition.unlock()
            }
        }
    }

    /// Whether the download finished with the file whole.
    public var isWhole: Bool {
        condition.lock()
        defer { condition.unlock() }
        return ended
    }

    /// Blocks until the file holds more than `offset` bytes, or the download ended or failed; fails
    /// once the reader has waited `waitingBudget` in all.
    func wait(beyond offset: Int64) -> Outcome {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let failure { return .failed(failure) }
            if written > offset { return .available }
            if ended { return .ended }
            let start = ContinuousClock.now
            let left = waitingBudget - waited
            let timedOut = left <= .zero || !condition.wait(until: Date().addingTimeInterval(left / .seconds(1)))
            waited += ContinuousClock.now - start
            if timedOut, failure == nil, written <= offset, !ended {
                gaveWay = true
                failure = BundleError(
                    .unreadableFile,
                    message: "the download slowed: the import waited \(waitingBudget) for it and gave way, to read the "
                        + "bundle once it is whole")
            }
        }
    }

    /// Blocks until the file holds `count` bytes, or the download finished; throws its failure.
    func waitUntil(holds count: Int64) throws(BundleError) {
        if case .failed(let error) = wait(beyond: count - 1) { throw error }
    }

    /// The reader stopped (the import failed or was closed): nothing may wait on the download any more.
    func abandon() {
        update { arrival in
            if !arrival.ended, arrival.failure == nil {
                arrival.failure = BundleError(.unreadableFile, message: "the import stopped reading the bundle")
            }
        }
    }

    private func update(_ change: (BundleArrival) -> Void) {
        condition.lock()
        change(self)
        var ready: [CheckedContinuation<Void, Never>] = []
        if importMayStart { swap(&ready, &importWaiters) }
        condition.broadcast()
        condition.unlock()
        for waiter in ready { waiter.resume() }
    }
}
