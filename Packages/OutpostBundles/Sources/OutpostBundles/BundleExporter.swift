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
        try write(project: projectID, records: records, checkpoints: checkpoints, format: format, to: url)
    }
}
