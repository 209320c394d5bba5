import Foundation
import OutpostSchema
import OutpostWire

/// Writes a project's records as a bundle file: what a device exports (`LocalStore.exportBundle`, which
/// chooses the records) and what round-trip tests compare. The output is deterministic for the same
/// records in the same order: `asOf` is the newest `updatedAt`, so the same data gives the same bytes.
public struct BundleExporter: Sendable {
    /// An exporter.
    public init() {}

    /// Writes `records` (parents before children) as project `projectID`'s bundle at `url`, its header
    /// carrying `checkpoints` (the points of the server's history the records were read at; see
    /// `BundleCheckpoints`); on any failure the partial file is removed.
    public func export(
        project projectID: UUID, records: [EntityRecord], checkpoints: [String] = [], format: BundleFormat, to url: URL
    ) throws(BundleError) {
        try export(
            project: projectID, asOf: records.map(\.sync.updatedAt).max(), checkpoints: checkpoints, format: format, to: url
        ) { write in for record in records { try write(record) } }
    }

    /// `export`, the records handed over one at a time by `records` as the file is written, so a project
    /// larger than memory can be exported: `asOf` must be the newest `updatedAt` among them.
    public func export(
        project projectID: UUID, asOf: Date?, checkpoints: [String] = [], format: BundleFormat, to url: URL,
        records: BundleRecords
    ) throws(BundleError) {
        try write(project: projectID, asOf: asOf, checkpoints: checkpoints, format: format, to: url, records: records)
    }
}

/// A bundle's records handed to an exporter one at a time: called once, it calls `write` with each
/// record, parents before children, and throws what reading them throws.
public typealias BundleRecords = (_ write: (EntityRecord) throws -> Void) throws -> Void
