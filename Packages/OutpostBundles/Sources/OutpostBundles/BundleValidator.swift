import Foundation
import OutpostSchema

/// Checks a bundle without a database: well-formedness, the schema, every record against the entity
/// catalog's rules, every record in the header's project as far as the bundle tells (`ProjectScope`),
/// duplicate ids, and for a zip every file's size and SHA-256. Used by
/// `outpost bundle validate` and by servers before they publish a bundle.
public struct BundleValidator: Sendable {
    /// The bounds the bundle must keep; validation stops after `maximumReportedErrors` errors.
    public var limits: BundleLimits

    /// A validator with the given limits.
    public init(limits: BundleLimits = .standard) {
        self.limits = limits
    }

    /// Every located error in the bundle at `url`, in document order; empty when it is valid.
    public func errors(inBundleAt url: URL) -> [BundleError] {
        var errors: [BundleError] = []
        func keep(_ error: BundleError) -> Bool {
            if !errors.contains(error) { errors.append(error) }
            return errors.count < limits.maximumReportedErrors
        }
        let source: BundleSource
        let reader: any BundleItemReader
        do {
            source = try BundleSource(url: url, limits: limits)
            reader = try source.reader(collecting: true)
        } catch {
            return [error]
        }
        var seen: [EntityType: Set<UUID>] = [:]
        var scope = ProjectScope(maximumWaiting: limits.maximumReportedErrors + 1)
        var files: [FileReference] = []
        var reported = 0
        do {
            while let item = try reader.next() {
                for error in reader.collectedErrors.dropFirst(reported) { _ = keep(error) }
                reported = reader.collectedErrors.count
                switch item {
                case .header(let header):
                    for refusal in scope.header(header.projectID) {
                        guard keep(refusal) else { return errors }
                    }
                case .file(let file, _): files.append(file)
                case .record(let record, let location):
                    for failure in record.validationErrors {
                        guard keep(BundleError(failure, at: location)) else { return errors }
                    }
                    for refusal in scope.check(record, at: location) {
                        guard keep(refusal) else { return errors }
                    }
                    if !seen[record.entity, default: []].insert(record.id).inserted {
                        let duplicate = BundleError(.duplicateRecord, message: "a second record with this id",
                            entity: record.entity, id: record.id).located(location)
                        guard keep(duplicate) else { return errors }
                    }
                }
                if errors.count >= limits.maximumReportedErrors { return errors }
            }
        } catch {
            for collected in reader.collectedErrors.dropFirst(reported) { _ = keep(collected) }
            _ = keep(error)
            return errors
        }
        for error in reader.collectedErrors.dropFirst(reported) { _ = keep(error) }
        if let archive = source.archive {
            for file in files {
                do { try archive.verify(file) } catch { guard keep(error) else { break } }
            }
        }
        return errors
    }
}
