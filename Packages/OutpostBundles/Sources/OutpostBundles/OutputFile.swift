import Foundation

/// A file written through a 64 KiB buffer, so a writer can emit many small pieces cheaply; or, without
/// a file, a buffer its owner empties with `take()` (a server streaming a bundle as it is written).
final class OutputFile {
    private let handle: FileHandle?
    private let path: String
    private var buffer: [UInt8] = []

    /// An output that keeps what is written until `take()`.
    init() {
        handle = nil
        path = ""
        buffer.reserveCapacity(1 << 16)
    }

    init(path: String) throws(BundleError) {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw BundleError(.unreadableFile, message: "cannot create the file", file: path)
        }
        self.handle = handle
        self.path = path
        buffer.reserveCapacity(1 << 16)
    }

    func write(_ text: String) throws(BundleError) {
        buffer.append(contentsOf: text.utf8)
        if handle != nil, buffer.count >= 1 << 16 { try flush() }
    }

    /// What was written since the last call (memory outputs only).
    func take() -> [UInt8] {
        defer { buffer.removeAll(keepingCapacity: true) }
        return buffer
    }

    func close() throws(BundleError) {
        guard let handle else { return }
        try flush()
        do { try handle.close() } catch {
            throw BundleError(.unreadableFile, message: "cannot close: \(error)", file: path, underlying: error)
        }
    }

    private func flush() throws(BundleError) {
        guard let handle else { return }
        do { try handle.write(contentsOf: buffer) } catch {
            throw BundleError(.unreadableFile, message: "cannot write: \(error)", file: path, underlying: error)
        }
        buffer.removeAll(keepingCapacity: true)
    }
}
