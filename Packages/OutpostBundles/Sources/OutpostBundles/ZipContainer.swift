import Crypto
import Foundation
import OutpostWire
import ZIPFoundation

/// A zip bundle: one manifest (`bundle.xml` or `bundle.json`) and the files it references. Every entry
/// is checked before anything is read: names stay inside the bundle, no symbolic links, declared sizes
/// within the limits and a plausible compression ratio. Reading then counts real bytes against the
/// declared ones, so an archive that lies about its sizes is stopped as soon as it does.
final class ZipContainer {
    let path: String
    private let archive: Archive
    private let limits: BundleLimits
    private var entries: [String: Entry] = [:]

    init(path: String, limits: BundleLimits) throws(BundleError) {
        self.path = path
        self.limits = limits
        do {
            archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read)
        } catch {
            throw BundleError(.suspiciousArchive, message: "not a readable zip archive (truncated or damaged: \(error))", file: path,
                underlying: error)
        }
        var total: Int64 = 0
        var count = 0
        for entry in archive {
            count += 1
            let name = entry.path
            guard count <= limits.maximumArchiveEntries else {
                throw BundleError(.limitExceeded, message: "the archive holds more than \(limits.maximumArchiveEntries) entries", file: path)
            }
            if let problem = ArchivePath.problem(with: name) {
                throw BundleError(.unsafeArchiveEntry, message: "refused: \(problem)", file: path, archiveEntry: name)
            }
            switch entry.type {
            case .symlink:
                throw BundleError(.unsafeArchiveEntry, message: "refused: a symbolic link", file: path, archiveEntry: name)
            case .directory:
                continue
            case .file:
                break
            }
            let expanded = Int64(clamping: entry.uncompressedSize)
            let compressed = Int64(clamping: entry.compressedSize)
            total += expanded
            guard total <= limits.maximumExpandedBytes else {
                throw BundleError(.suspiciousArchive,
                    message: "the entries expand to more than \(limits.maximumExpandedBytes) bytes", file: path, archiveEntry: name)
            }
            if expanded > 1 << 20, expanded / max(compressed, 1) > limits.maximumCompressionRatio {
                throw BundleError(.suspiciousArchive,
                    message: "expands \(expanded / max(compressed, 1))× (\(compressed) → \(expanded) bytes), above the limit of \(limits.maximumCompressionRatio)×",
                    file: path, archiveEntry: name)
            }
            guard entries[name] == nil else {
                throw BundleError(.suspiciousArchive, message: "the archive holds two entries with this name", file: path, archiveEntry: name)
            }
            entries[name] = entry
        }
    }

    /// The manifest's entry name and encoding.
    func manifest() throws(BundleError) -> (name: String, format: BundleFormat) {
        let found = BundleFormat.allCases.filter { entries[$0.manifestName] != nil }
        guard let format = found.first else {
            throw BundleError(.missingFile, message: "the archive holds no bundle.xml or bundle.json", file: path)
        }
        guard found.count == 1 else {
            throw BundleError(.suspiciousArchive, message: "the archive holds both bundle.xml and bundle.json", file: path)
        }
        return (format.manifestName, format)
    }

    /// The size entry `name` declares it expands to (its copy is stopped past it), nil when there is none.
    func declaredSize(of name: String) -> Int64? {
        entries[name].map { Int64(clamping: $0.uncompressedSize) }
    }

    /// Copies entry `name` into `destination`, stopping if it expands past its declared size.
    func extract(_ name: String, to destination: URL) throws(BundleError) {
        guard FileManager.default.createFile(atPath: destination.path, contents: nil),
            let output = FileHandle(forWritingAtPath: destination.path)
        else { throw BundleError(.unreadableFile, message: "cannot create \(destination.path)", file: path, archiveEntry: name) }
        defer { try? output.close() }
        try read(name) { chunk in try output.write(contentsOf: chunk) }
    }

    /// Checks that the archive holds `file` with the declared size and SHA-256.
    func verify(_ file: FileReference) throws(BundleError) {
        try check(file) { _ in }
    }

    /// Checks `file` as `verify` does while copying it to `destination`; on any failure the copy is removed.
    func extractVerified(_ file: FileReference, to destination: URL) throws(BundleError) {
        guard FileManager.default.createFile(atPath: destination.path, contents: nil),
            let output = FileHandle(forWritingAtPath: destination.path)
        else { throw BundleError(.unreadableFile, message: "cannot create \(destination.path)", file: path, archiveEntry: file.name) }
        do {
            try check(file) { chunk in try output.write(contentsOf: chunk) }
            try output.synchronize()
            try output.close()
        } catch {
            try? output.close()
            try? FileManager.default.removeItem(at: destination)
            if let error = error as? BundleError { throw error }
            throw BundleError(.unreadableFile, message: "cannot write \(destination.path): \(error)", file: path, archiveEntry: file.name,
                underlying: error)
        }
    }

    /// Streams `file`'s entry through `consumer` and checks its size and digest against the manifest's.
    private func check(_ file: FileReference, _ consumer: (Data) throws -> Void) throws(BundleError) {
        if let problem = ArchivePath.problem(with: file.name) {
            throw BundleError(.unsafeArchiveEntry, message: "the manifest names a file with \(problem)", file: path, archiveEntry: file.name)
        }
        guard let entry = entries[file.name] else {
            throw BundleError(.missingFile, message: "the manifest lists this file but the archive does not hold it", file: path,
                archiveEntry: file.name)
        }
        guard Int64(clamping: entry.uncompressedSize) == file.byteSize else {
            throw BundleError(.checksumMismatch,
                message: "the manifest declares \(file.byteSize) bytes, the archive holds \(entry.uncompressedSize)", file: path,
                archiveEntry: file.name)
        }
        var hash = SHA256()
        var size: Int64 = 0
        try read(file.name) { chunk in
            size += Int64(chunk.count)
            hash.update(data: chunk)
            try consumer(chunk)
        }
        let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
        guard size == file.byteSize, digest == file.sha256 else {
            throw BundleError(.checksumMismatch,
                message: "SHA-256 is \(digest) (\(size) bytes), the manifest declares \(file.sha256) (\(file.byteSize) bytes)",
                file: path, archiveEntry: file.name)
        }
    }

    /// Streams entry `name` through `consumer`, counting real bytes against the declared size.
    private func read(_ name: String, _ consumer: (Data) throws -> Void) throws(BundleError) {
        guard let entry = entries[name] else {
            throw BundleError(.missingFile, message: "no such entry", file: path, archiveEntry: name)
        }
        let declared = Int64(clamping: entry.uncompressedSize)
        var seen: Int64 = 0
        do {
            _ = try archive.extract(entry, bufferSize: 64 * 1024, skipCRC32: false) { chunk in
                seen += Int64(chunk.count)
                guard seen <= declared else { throw Oversized() }
                do { try consumer(chunk) } catch { throw ConsumerFailure(underlying: error) }
            }
        } catch is Oversized {
            throw BundleError(.suspiciousArchive, message: "expands past its declared \(declared) bytes", file: path, archiveEntry: name)
        } catch let failure as ConsumerFailure {
            // Where the bytes went failed (a full disk, say), not the archive.
            throw BundleError(.unreadableFile, message: "cannot copy it out: \(failure.underlying)", file: path, archiveEntry: name,
                underlying: failure.underlying)
        } catch {
            throw BundleError(.suspiciousArchive, message: "cannot be read (damaged or truncated: \(error))", file: path, archiveEntry: name,
                underlying: error)
        }
        guard seen == declared else {
            throw BundleError(.suspiciousArchive, message: "holds \(seen) bytes, not the declared \(declared)", file: path, archiveEntry: name)
        }
    }

    private struct Oversized: Error {}
    private struct ConsumerFailure: Error { let underlying: any Error }
}
