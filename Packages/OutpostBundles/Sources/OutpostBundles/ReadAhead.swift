import Foundation

/// Runs a bundle reader on a thread of its own, a bounded number of items ahead of the import.
///
/// Why: parsing (libxml2 with the XSD, or the JSON tokenizer) and building records is about half of an
/// import's time, and checking and writing them the other half; on a machine with two cores the two halves
/// overlap. Memory stays bounded: at most `batchLimit` batches of `batchSize` items wait at any time.
///
/// The reader is used only on the read-ahead thread from `start()` until the thread ends, and `finish()`
/// (which the importer always calls, on success or failure) waits for that end, so the reader never runs on
/// two threads at once and outlives its last use.
final class ReadAhead: @unchecked Sendable {
    /// One handed-over item, with the document's bytes read when it was produced (for progress).
    struct Entry {
        let item: BundleItem
        let bytesRead: Int64
    }

    private let reader: any BundleItemReader
    private let batchSize: Int
    private let batchLimit: Int
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var batches: [[Entry]] = []
    private var failure: BundleError?
    private var ended = false
    private var cancelled = false
    private var threadDone = false
    // Used by the consumer only:
    private var current: [Entry] = []
    private var position = 0

    init(_ reader: any BundleItemReader, batchSize: Int = 256, batchLimit: Int = 8) {
        self.reader = reader
        self.batchSize = batchSize
        self.batchLimit = batchLimit
    }

    /// Starts reading on a new thread.
    func start() {
        let thread = Thread { [self] in produce() }
        thread.name = "outpost-bundle-reader"
        thread.start()
    }

    /// The next item in document order, nil at the end; rethrows the reader's error where it happened.
    func next() throws(BundleError) -> Entry? {
        if position < current.count {
            position += 1
            return current[position - 1]
        }
        condition.lock()
        while batches.isEmpty && !ended {
            condition.wait()
        }
        if batches.isEmpty {
            let error = failure
            condition.unlock()
            if let error { throw error }
            return nil
        }
        current = batches.removeFirst()
        condition.broadcast()
        condition.unlock()
        position = 1
        return current[0]
    }

    /// Stops the reader (if it is still going) and waits for its thread to end.
    func finish() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        while !threadDone {
            condition.wait()
        }
        condition.unlock()
    }

    private func produce() {
        var batch: [Entry] = []
        batch.reserveCapacity(batchSize)
        var error: BundleError?
        do {
            while let item = try reader.next() {
                batch.append(Entry(item: item, bytesRead: reader.bytesRead))
                if batch.count == batchSize {
                    guard hand(batch) else { break }
                    batch.removeAll(keepingCapacity: true)
                }
            }
        } catch let thrown {
            error = thrown
        }
        condition.lock()
        if !batch.isEmpty && !cancelled { batches.append(batch) }
        failure = error
        ended = true
        threadDone = true
        condition.broadcast()
        condition.unlock()
    }

    /// Queues a full batch, waiting while `batchLimit` are queued; false once the import has stopped.
    private func hand(_ batch: [Entry]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while batches.count >= batchLimit && !cancelled {
            condition.wait()
        }
        guard !cancelled else { return false }
        batches.append(batch)
        condition.broadcast()
        return true
    }
}
