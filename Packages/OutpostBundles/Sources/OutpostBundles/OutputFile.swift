import Foundation

/// A file written through a 64 KiB buffer, so a writer can emit many small pieces cheaply.
final class OutputFile {
    private let handle: FileHandle
    private let path: String
    private var buffer: [UInt8] = []

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
        if buffer.count >= 1 << 16 { try flush() }
    }

    func close() throws(BundleError) {
        try flush()
        do { try handle.close() } catch { throw BundleError(.unreadableFile, message: "cannot close: \(error)", file: path) }
    }

    private func flush() throws(BundleError) {
        do { try handle.write(contentsOf: buffer) } catch {
            throw BundleError(.unreadableFile, message: "cannot write: \(error)", file: path)
        }
        buffer.removeAll(keepingCapacity: true)
    }
}
