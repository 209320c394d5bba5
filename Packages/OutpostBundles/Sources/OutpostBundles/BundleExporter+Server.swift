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
