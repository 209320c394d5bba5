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

    /// Opens `path` for writing, created or emptied: open(2), not `FileManager.createFile`, which writes
    /// an empty file beside `path` and renames it over whatever is there, so `--out /dev/null` replaced
    /// the machine's /dev/null with a regular file (attack 69). A device or a pipe is written into.
    init(path: String) throws(BundleError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw BundleError(.unreadableFile, message: "cannot create the file: \(String(cString: strerror(errno)))", file: path)
        }
        self.handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        self.path = path
        buffer.reserveCapacity(1 << 16)
    }

    /// Removes what a failed write left at `url`: a regular file only, never a device or a pipe it wrote into.
    static func removeLeftover(at url: URL) {
        guard (try? FileManager.default.attributesOfItem(atPath: url.path)[.type] as? FileAttributeType) == .typeRegular else { return }
        try? FileManager.default.removeItem(at: url)
    }

    /// Puts the finished file `finished` at `url`: moved there, over a regular file or nothing; copied into
    /// anything else (a device, a pipe), which a move would replace.
    static func place(_ finished: URL, at url: URL) throws {
        let type = try? FileManager.default.attributesOfItem(atPath: url.path)[.type] as? FileAttributeType
        if type == nil || type == .typeRegular {
            if type != nil { try FileManager.default.removeItem(at: url) }
            try FileManager.default.moveItem(at: finished, to: url)
            return
        }
        let source = try FileHandle(forReadingFrom: finished)
        defer { try? source.close() }
        let output = try OutputFile(path: url.path)
        while let piece = try source.read(upToCount: 1 << 16), !piece.isEmpty {
            output.buffer.append(contentsOf: piece)
            try output.flushIfFull()
        }
        try output.close()
    }

    func write(_ text: String) throws(BundleError) {
        append(text)
        try flushIfFull()
    }

    /// Appends `text` to the buffer without writing it out; call `flushIfFull()` once a piece is done.
    func append(_ text: String) {
        buffer.append(contentsOf: text.utf8)
    }

    /// Appends bytes as they are, like `append(_:)`.
    func append(_ bytes: ArraySlice<UInt8>) {
        buffer.append(contentsOf: bytes)
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
