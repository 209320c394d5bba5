import Foundation
import OutpostSchema

/// A document crews consult on site (a drawing, an RFI, a design note), downloaded with the pre-sync bundle.
public struct ReferenceDocument: Syncable {
    /// What sort of document it is.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case drawing, rfi, designNote, specification, other
    }

    public static let entityType = EntityType.referenceDocument
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    public var title: String
    public var kind: Kind
    public var revision: String
    /// The file's name inside the bundle or media store.
    public var fileName: String
    public var byteSize: Int64
    /// SHA-256 of the file, lowercase hex, checked whenever the file is moved.
    public var sha256: String

    /// Creates a reference document.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, title: String, kind: Kind, revision: String = "", fileName: String,
        byteSize: Int64, sha256: String
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.title = title
        self.kind = kind
        self.revision = revision
        self.fileName = fileName
        self.byteSize = byteSize
        self.sha256 = sha256
    }
}
