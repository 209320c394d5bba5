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
        append(text)
        try flushIfFull()
    }

    /// Appends `text` to the buffer without writing it out; call `flushIfFull()` once a piece is done.
    func append(_ text: String) {
        buffer.append(contentsOf: text.utf8)
    }

    /// Appends `text` as a JSON string: `"`, `\\` and the control characters U+0000–U+001F escaped
    /// (`\n`, `\r`, `\t`, else `\u00xx`), everything else as its UTF-8. Byte by byte, which is safe: no
    /// byte of a multi-byte UTF-8 sequence is below 0x80, so none is taken for a quote or a control.
    func appendQuoted(_ text: String) {
        buffer.append(0x22)
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                start = index + 1
                switch byte {
                case 0x22: buffer.append(contentsOf: [0x5C, 0x22])
                case 0x5C: buffer.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: buffer.append(contentsOf: [0x5C, 0x6E])
                case 0x0D: buffer.append(contentsOf: [0x5C, 0x72])
                case 0x09: buffer.append(contentsOf: [0x5C, 0x74])
                default:
                    buffer.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0xF)]])
                }
            }
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        buffer.append(0x22)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Writes the buffer out once it holds 64 KiB (file outputs only).
    func flushIfFull() throws(BundleError) {
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
