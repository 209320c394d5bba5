import Foundation
import OutpostModels

extension BundleExporter {
    /// Writes records a caller already holds (a sync server's, say) as project `projectID`'s bundle at
    /// `url`, returning how many it wrote. Pass them parents first (catalog order) for a bundle that
    /// imports in one pass; `asOf` is the newest `updatedAt` among them.
    @discardableResult
    public func writeBundle(
        project projectID: UUID, records: some Sequence<EntityRecord>, asOf: Date?, format: BundleFormat, to url: URL
    ) throws(BundleError) -> Int {
        let output = try OutputFile(path: url.path)
        let writer: any BundleWriter = format == .xml ? XMLBundleWriter(output: output) : JSONBundleWriter(output: output)
        var count = 0
        do {
            try writer.begin(BundleHeader(formatVersion: BundleFormat.currentVersion, projectID: projectID, asOf: asOf))
            for record in records {
                try writer.write(record)
                count += 1
            }
            try writer.end()
            try output.close()
        } catch {
            try? output.close()
            try? FileManager.default.removeItem(at: url)
            throw error.located(SourceLocation(file: url.path))
        }
        return count
    }
}

/// Encodes a bundle piece by piece in memory, for a caller that streams it as it goes (a sync server
/// answering a download): the header on creation, then records (parents first), taking the bytes
/// written so far whenever it wants to send them, so the whole bundle never sits in memory.
public final class BundleStreamEncoder {
    private let output = OutputFile()
    private let writer: any BundleWriter

    /// Starts project `projectID`'s bundle; `asOf` is the newest `updatedAt` among its records.
    public init(project projectID: UUID, asOf: Date?, format: BundleFormat) throws(BundleError) {
        writer = format == .xml ? XMLBundleWriter(output: output) : JSONBundleWriter(output: output)
        try writer.begin(BundleHeader(formatVersion: BundleFormat.currentVersion, projectID: projectID, asOf: asOf))
    }

    /// Appends one record.
    public func write(_ record: EntityRecord) throws(BundleError) {
        try writer.write(record)
    }

    /// Closes the bundle; take the last bytes afterwards.
    public func finish() throws(BundleError) {
        try writer.end()
    }

    /// The bytes written since the last call.
    public func take() -> [UInt8] {
        output.take()
    }
}
