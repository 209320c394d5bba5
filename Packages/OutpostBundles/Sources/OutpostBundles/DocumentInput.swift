import Foundation

/// A document file read in chunks, counting bytes for progress and refusing to go past the size limit.
final class DocumentInput {
    let path: String
    private let handle: FileHandle
    private let fileDescriptor: Int32
    private let limit: Int64
    private(set) var bytesRead: Int64 = 0
    /// Set when the document went past `limit`; the read then fails.
    private(set) var exceededLimit = false
    /// The document's size on disk, for progress.
    let totalBytes: Int64

    init(path: String, limit: Int64) throws(BundleError) {
        self.path = path
        self.limit = limit
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BundleError(.unreadableFile, message: "cannot open the file", file: path)
        }
        self.handle = handle
        fileDescriptor = handle.fileDescriptor
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
        totalBytes = size ?? 0
    }

    deinit { try? handle.close() }

    /// Reads up to `count` bytes into `buffer`: the count read, 0 at the end, -1 on failure or past the limit.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        guard !exceededLimit else { return -1 }
        var result: Int
        repeat { result = Foundation.read(fileDescriptor, buffer, count) } while result < 0 && errno == EINTR
        guard result >= 0 else { return -1 }
        bytesRead += Int64(result)
        if bytesRead > limit {
            exceededLimit = true
            return -1
        }
        return result
    }

    var limitError: BundleError {
        BundleError(.limitExceeded, message: "the document is larger than the limit of \(limit) bytes", file: path)
    }
}
