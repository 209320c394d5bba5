import Foundation
import OutpostSchema
import OutpostWire

extension BundleExporter {
    /// Writes `records` as project `projectID`'s bundle at `url`, listing `files` (a zip's) and
    /// `checkpoints` in the header; on any failure the partial file is removed. The one place a bundle
    /// file is written.
    func write(
        project projectID: UUID, asOf: Date?, files: [FileReference] = [], checkpoints: [String],
        format: BundleFormat, to url: URL, records: BundleRecords
    ) throws(BundleError) {
        let header: BundleHeader
        do {
            header = try .current(project: projectID, asOf: asOf, checkpoints: checkpoints, files: files)
        } catch {
            throw error.located(SourceLocation(file: url.path))
        }
        let output = try OutputFile(path: url.path)
        let writer: any BundleWriter = format == .xml ? XMLBundleWriter(output: output) : JSONBundleWriter(output: output)
        do {
            try writer.begin(header)
            try records { record in try writer.write(record) }
            try writer.end()
            try output.close()
        } catch {
            try? output.close()
            OutputFile.removeLeftover(at: url)
            if let error = error as? BundleError { throw error.located(SourceLocation(file: url.path)) }
            throw BundleError(.databaseFailure, message: "cannot read the records to export: \(error)", file: url.path, underlying: error)
        }
    }
}

/// Encodes a bundle piece by piece in memory, for a caller that streams it as it goes (a sync server
/// answering a download): the header on creation, then records (parents first), taking the bytes
/// written so far whenever it wants to send them, so the whole bundle never sits in memory.
public final class BundleStreamEncoder {
    private let output = OutputFile()
    private let writer: any BundleWriter

    /// Starts project `projectID`'s bundle; `asOf` is the newest `updatedAt` among its records, and
    /// `checkpoints` the points of the server's history they were read at (see `BundleCheckpoints`).
    public init(project projectID: UUID, asOf: Date?, checkpoints: [String] = [], format: BundleFormat) throws(BundleError) {
        let header = try BundleHeader.current(project: projectID, asOf: asOf, checkpoints: checkpoints)
        writer = format == .xml ? XMLBundleWriter(output: output) : JSONBundleWriter(output: output)
        try writer.begin(header)
    }

    /// Appends one record.
    public func write(_ record: EntityRecord) throws(BundleError) {
        try writer.write(record)
    }

    /// Appends one record whose fields are still the wire's JSON text, `{"name":{"kind":value},…}`, as
    /// a server stores them (`record.fields` is not read): read only as far as the bundle's encoding
    /// needs, into the same bytes `write(_:)` gives the decoded record. Stored fields that do not read
    /// throw `invalidRecord`, naming the record, with the reader's error as the cause.
    public func write(_ record: EntityRecord, wireFields: String) throws(BundleError) {
        try writer.write(record, wireFields: wireFields)
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
