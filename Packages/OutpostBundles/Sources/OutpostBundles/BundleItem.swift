import Foundation
import OutpostSchema
import OutpostWire

/// One thing a bundle reader hands on, in document order: the header, a file reference, or a record.
enum BundleItem {
    case header(BundleHeader)
    case file(FileReference, SourceLocation)
    case record(EntityRecord, SourceLocation)

    /// About what the item holds in memory: its text and blob values' bytes, and a fixed allowance for
    /// the rest. What bounds the items read ahead and batched by bytes, not only by count: 2,048 records
    /// of three 1 MB values each read ahead took an import to 1.35 GB for a 900 MB bundle (attack 68).
    var heldBytes: Int {
        guard case .record(let record, _) = self else { return 1024 }
        return 512 + record.valueBytes
    }
}

/// What a bundle says about itself.
struct BundleHeader: Sendable, Hashable {
    var formatVersion: Int
    var projectID: UUID
    /// The newest `updatedAt` among the records, when the bundle has any.
    var asOf: Date?
    /// The points of the server's history its records were read at (format version 2 on; see
    /// `BundleCheckpoints`).
    var checkpoints: [String] = []
    /// The files a zip container ships beside the manifest (written by exporters; readers hand each
    /// one on as a `.file` item instead).
    var files: [FileReference] = []
}

extension BundleHeader {
    /// The header this build writes (the current format version), its checkpoints checked first: the
    /// one place both writers (`BundleExporter`, `BundleStreamEncoder`) make theirs.
    static func current(
        project projectID: UUID, asOf: Date?, checkpoints: [String], files: [FileReference] = []
    ) throws(BundleError) -> BundleHeader {
        if let bad = BundleCheckpoints.firstInvalid(in: checkpoints) {
            throw BundleError(.schemaViolation, message: "the header's checkpoints: \(bad)")
        }
        return BundleHeader(
            formatVersion: BundleFormat.currentVersion, projectID: projectID, asOf: asOf, checkpoints: checkpoints, files: files)
    }
}

/// A file a zip container ships beside its manifest (a thumbnail, a drawing's PDF), with the size and
/// digest the importer checks it against.
struct FileReference: Sendable, Hashable {
    var name: String
    var byteSize: Int64
    var sha256: String
}

/// A streaming reader of one encoding. `next()` returns nil at the end of the document.
///
/// In collecting mode (validation) a reader skips a record that breaks the schema, keeps its located
/// error in `collectedErrors` and goes on; a document that is not well-formed ends the read either way.
protocol BundleItemReader: AnyObject {
    func next() throws(BundleError) -> BundleItem?
    /// Bytes of the document consumed so far.
    var bytesRead: Int64 { get }
    /// Errors kept in collecting mode.
    var collectedErrors: [BundleError] { get }
}

/// Records as the bundle gives them, before any rule is checked: every catalog field present (`.null`
/// when absent), synced, not orphaned.
final class RecordShape: Sendable {
    let description: EntityDescription
    /// Every field null: a record's starting point, copied once per record.
    let emptyFields: [String: FieldValue]

    init(_ description: EntityDescription) {
        self.description = description
        emptyFields = Dictionary(uniqueKeysWithValues: description.fields.map { ($0.name, FieldValue.null) })
    }

    static let all: [EntityType: RecordShape] = Dictionary(
        uniqueKeysWithValues: EntityCatalog.all.map { ($0.type, RecordShape($0)) })
}
