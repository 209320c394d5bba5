import Foundation

/// A document file read in chunks, counting bytes for progress and refusing to go past the size limit.
/// With an `arrival` the file is still being downloaded: a read at the end of what is there waits for
/// more, and the document ends where the download finished.
final class DocumentInput {
    let path: String
    private let handle: FileHandle
    private let fileDescriptor: Int32
    private let limit: Int64
    private let arrival: BundleArrival?
    private(set) var bytesRead: Int64 = 0
    /// Set when the document went past `limit`, or its download failed; the read then fails with `failure`.
    private(set) var failed = false
    private var arrivalFailure: BundleError?

    init(path: String, limit: Int64, arrival: BundleArrival? = nil) throws(BundleError) {
        self.path = path
        self.limit = limit
        self.arrival = arrival
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BundleError(.unreadableFile, message: "cannot open the file", file: path)
        }
        self.handle = handle
        fileDescriptor = handle.fileDescriptor
    }

    deinit { try? handle.close() }

    /// Reads up to `count` bytes into `buffer`: the count read, 0 at the end, -1 on failure or past the limit.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        guard !failed else { return -1 }
        if let arrival, case .failed(let error) = arrival.wait(beyond: bytesRead) {
            arrivalFailure = error.located(SourceLocation(file: path))
            failed = true
            return -1
        }
        var result: Int
        repeat { result = Foundation.read(fileDescriptor, buffer, count) } while result < 0 && errno == EINTR
        guard result >= 0 else { return -1 }
        bytesRead += Int64(result)
        if bytesRead > limit {
            failed = true
            return -1
        }
        return result
    }

    /// Why the read failed: the download's failure, else the size limit.
    var failure: BundleError {
        arrivalFailure
            ?? BundleError(.limitExceeded, message: "the document is larger than the limit of \(limit) bytes", file: path)
    }
}
