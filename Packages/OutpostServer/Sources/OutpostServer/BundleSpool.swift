import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A bundle's encoded bytes on their way to one client: the encoder appends as fast as it encodes, the
/// sender reads at the client's pace. In a temporary file, unlinked as soon as it is opened, so nothing
/// outlives the download, a crash included.
///
/// Why a file: the encoder reads the project from one database snapshot, and a snapshot held open keeps
/// SQLite from checkpointing its WAL (PostgreSQL from vacuuming). Encoding straight into the connection
/// held the snapshot for as long as the slowest client took to read; a reader at 1 KB/s kept it for
/// hours while the WAL grew by every push (608 MB while 200 MB was pushed, attack 56). Spooled, the
/// snapshot is held about as long as encoding takes. The encoder stays at most `aheadLimit` bytes
/// ahead of the sender, so one download takes at most that much disk; past it, it waits for the
/// client, snapshot held, at most `waitLimit` in all, and then fails with `WaitedTooLong`: a client
/// reading a bundle past the limit at 26 KB/s kept it for hours (attack 125, F2).
actor BundleSpool {
    private let descriptor: Int32
    private let aheadLimit: Int
    private let waitLimit: Duration
    private var waited: Duration = .zero
    private var written = 0
    private var consumed = 0
    private var finished = false
    private var failure: (any Error)?
    private var closed = false
    private var reader: CheckedContinuation<Void, Never>?
    private var writer: CheckedContinuation<Void, Never>?

    /// A spool in `directory` (the system's temporary folder by default).
    init(aheadLimit: Int, waitLimit: Duration, in directory: URL = FileManager.default.temporaryDirectory) throws {
        let path = directory.appendingPathComponent("outpost-bundle-\(UUID().uuidString).spool").path
        #if canImport(Glibc)
            let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #else
            let descriptor = Darwin.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #endif
        guard descriptor >= 0 else { throw SpoolError(operation: "create \(path)", code: errno) }
        unlink(path)
        self.descriptor = descriptor
        self.aheadLimit = aheadLimit
        self.waitLimit = waitLimit
    }

    deinit {
        #if canImport(Glibc)
            _ = Glibc.close(descriptor)
        #else
            _ = Darwin.close(descriptor)
        #endif
    }

    /// Appends `bytes` once the sender is less than `aheadLimit` behind; throws once the sender closed
    /// the spool (the client is gone), and `WaitedTooLong` once this download's waits for room reach
    /// `waitLimit`.
    func append(_ bytes: [UInt8]) async throws {
        while !closed, written - consumed >= aheadLimit {
            let remaining = waitLimit - waited
            guard remaining > .zero else { throw WaitedTooLong(limit: waitLimit, aheadBytes: aheadLimit) }
            let started = ContinuousClock.now
            let timer = Task { [weak self] in
                try await Task.sleep(for: remaining)
                await self?.wakeWriter()
            }
            await withCheckedContinuation { writer = $0 }
            timer.cancel()
            waited += ContinuousClock.now - started
        }
        if closed { throw CancellationError() }
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                pwrite(descriptor, buffer.baseAddress! + offset, bytes.count - offset, off_t(written + offset))
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw SpoolError(operation: "write", code: errno)
            }
            offset += result
        }
        written += bytes.count
        wakeReader()
    }

    /// The encoder is done: the sender reads to the end and stops there.
    func finish() {
        finished = true
        wakeReader()
    }

    /// The encoder failed: the sender throws `error` instead of ending the bundle.
    func fail(_ error: any Error) {
        if failure == nil { failure = error }
        wakeReader()
    }

    /// The sender stopped (the client is gone): an encoder waiting for room, or appending, stops.
    func close() {
        closed = true
        wakeWriter()
    }

    /// Up to `maximum` bytes from `offset`, waiting for the encoder; nil at the end of a finished
    /// bundle; throws the encoder's failure.
    func read(from offset: Int, upTo maximum: Int) async throws -> [UInt8]? {
        while true {
            if let failure { throw failure }
            if written > offset {
                let count = min(maximum, written - offset)
                var bytes = [UInt8](repeating: 0, count: count)
                var done = 0
                while done < count {
                    let result = bytes.withUnsafeMutableBytes { buffer in
                        pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset + done))
                    }
                    if result < 0, errno == EINTR { continue }
                    guard result > 0 else { throw SpoolError(operation: "read", code: result < 0 ? errno : 0) }
                    done += result
                }
                consumed = offset + count
                wakeWriter()
                return bytes
            }
            if finished { return nil }
            await withCheckedContinuation { reader = $0 }
        }
    }

    private func wakeReader() {
        reader?.resume()
        reader = nil
    }

    private func wakeWriter() {
        writer?.resume()
        writer = nil
    }

    /// The encoder waited `limit` in all for a client to read, holding its snapshot: the download is cut.
    struct WaitedTooLong: Error, CustomStringConvertible {
        let limit: Duration
        let aheadBytes: Int
        var description: String {
            "the client read the bundle so slowly that its encoder, \(aheadBytes) bytes ahead, waited \(limit) holding the database snapshot; the download was cut"
        }
    }

    /// A spool file the system refused to create, write or read.
    struct SpoolError: Error, CustomStringConvertible {
        let operation: String
        let code: Int32
        var description: String { "could not \(operation) a bundle's spool file: \(String(cString: strerror(code)))" }
    }
}
