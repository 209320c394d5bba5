import Foundation
import OutpostSchema

/// A bundle reader run on a thread of its own, a bounded number of items ahead of the import, through
/// the one read-ahead pipeline (`OutpostModels.ReadAhead`).
///
/// Why: parsing (libxml2 with the XSD, or the JSON tokenizer) and building records is about half of an
/// import's time, and checking and writing them the other half; on a machine with two cores the two halves
/// overlap. Memory stays bounded: at most `batchLimit` batches of `batchSize` items are read and not yet
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
    }

    private let pipeline: ReadAhead<[Entry], BundleError>
    // Used by the consumer only:
    private var current: [Entry] = []
    private var position = 0

    /// Starts reading `reader` on a new thread, `batchSize` items a batch.
    init(_ reader: any BundleItemReader, batchSize: Int = 256, batchLimit: Int = 8) {
        let pipeline = ReadAhead<[Entry], BundleError>(depth: batchLimit)
        self.pipeline = pipeline
        let box = UncheckedReader(reader: reader)
        let thread = Thread {
            var failure: BundleError?
            do throws(BundleError) {
                var more = true
                while more, pipeline.roomBlocking() {
                    var batch: [Entry] = []
                    batch.reserveCapacity(batchSize)
                    while batch.count < batchSize {
                        guard let item = try box.reader.next() else {
                            more = false
                            break
                        }
                        batch.append(Entry(item: item, bytesRead: box.reader.bytesRead))
                    }
                    if !batch.isEmpty { pipeline.hand(batch) }
                }
            } catch {
                failure = error
            }
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
