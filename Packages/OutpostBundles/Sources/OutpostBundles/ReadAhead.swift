import Foundation
import OutpostSchema

/// A bundle reader run on a thread of its own, a bounded number of items ahead of the import, through
/// the one read-ahead pipeline (`OutpostModels.ReadAhead`); each record it hands over has passed the
/// catalog's rules (`EntityRecord.validationErrors`), and the first that does not ends the read with its
/// located error.
///
/// Why: parsing (libxml2 with the XSD, or the JSON tokenizer) and building records is about half of an
/// import's time, and checking and writing them the other half; on a machine with two cores the two halves
/// overlap. Memory stays bounded: at most `batchLimit` batches of `batchSize` items, and of about
/// `batchBytes` each (`BundleItem.heldBytes`: a batch ends once its items pass it), are read and not yet
/// taken. The parser blocks (libxml2 pulls its input), so it gets a thread, never one of Swift's pool.
///
/// The reader is used only on that thread until it ends, and `finish()` (which the stream always calls,
/// on success or failure) waits for that end, so the reader never runs on two threads at once and
/// outlives its last use.
final class ReaderThread {
    /// One handed-over item, with the document's bytes read when it was produced (for progress).
    struct Entry: @unchecked Sendable {
        // Unchecked: an item is made on the reader's thread and only read on the consumer's after the
        // pipeline's lock handed it over; nothing touches it on two threads at once.
        let item: BundleItem
        let bytesRead: Int64
        /// `item.heldBytes`, worked out once on the reader's thread for both bounds.
        let heldBytes: Int
    }

    private let pipeline: ReadAhead<[Entry], BundleError>
    // Used by the consumer only:
    private var current: [Entry] = []
    private var position = 0

    /// The most bytes of values a batch gathers before it is handed over (past it by one item at most).
    static let batchBytes = 2 << 20

    /// Starts reading `reader` on a new thread, `batchSize` items a batch, and no more than about
    /// `batchBytes` of values.
    init(_ reader: any BundleItemReader, batchSize: Int = 256, batchLimit: Int = 8, batchBytes: Int = ReaderThread.batchBytes) {
        let pipeline = ReadAhead<[Entry], BundleError>(depth: batchLimit)
        self.pipeline = pipeline
        let box = UncheckedReader(reader: reader)
        let thread = Thread {
            var failure: BundleError?
            do throws(BundleError) {
                var more = true
                while more, pipeline.roomBlocking() {
                    var batch: [Entry] = []
                    var held = 0
                    batch.reserveCapacity(batchSize)
                    defer { if !batch.isEmpty { pipeline.hand(batch) } }
                    while batch.count < batchSize, held < batchBytes {
                        guard let item = try box.reader.next() else {
                            more = false
                            break
                        }
                        // A record is held to the catalog's rules here, beside the parsing: on the
                        // import's thread it took a sixth of the time that thread, the longer of the two,
                        // spends (`perf`, stop 54).
                        if case .record(let record, let location) = item, let failure = record.validationErrors.first {
                            throw BundleError(failure, at: location)
                        }
                        let entry = Entry(item: item, bytesRead: box.reader.bytesRead, heldBytes: item.heldBytes)
                        held += entry.heldBytes
                        batch.append(entry)
                    }
                }
            } catch {
                failure = error
            }
            // The items read before a failure are handed over first, so the consumer meets every
            // earlier item's own refusal (a record of another project) before this one.
            pipeline.end(throwing: failure)
        }
        thread.name = "outpost-bundle-reader"
        thread.start()
    }

    /// The next item in document order, nil at the end; rethrows the reader's error where it happened.
    func next() throws(BundleError) -> Entry? {
        if position < current.count {
            position += 1
            return current[position - 1]
        }
        guard let batch = try pipeline.nextBlocking() else { return nil }
        current = batch
        position = 1
        return current[0]
    }

    /// Stops the reader (if it is still going) and waits for its thread to end.
    func finish() {
        pipeline.stopAndWait()
    }
}

/// The reader, moved to the reading thread: it is used there alone until `finish()` returns.
private struct UncheckedReader: @unchecked Sendable {
    let reader: any BundleItemReader
}
