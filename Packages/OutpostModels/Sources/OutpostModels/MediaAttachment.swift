import Foundation
import OutpostSchema

/// A photo or voice note attached to an issue or a daily log. The record and its small thumbnail
/// travel with structured data; the original file follows as media, on a good connection.
public struct MediaAttachment: Syncable {
    /// What was captured.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case photo, voiceNote
    }

    /// The largest thumbnail carried inline with the record.
    public static let maximumThumbnailBytes = 64 * 1024

    public static let entityType = EntityType.mediaAttachment
    public var id: UUID
    public var sync: SyncMetadata
    /// The issue it belongs to; exactly one of `issueID` and `dailyLogID` is set.
    public var issueID: UUID?
    /// The daily log it belongs to.
    public var dailyLogID: UUID?
    public var kind: Kind
    public var fileName: String
    /// MIME type of the original file.
    public var contentType: String
    public var byteSize: Int64
    /// SHA-256 of the original file, lowercase hex.
    public var sha256: String
    /// A small preview (JPEG) that syncs with the record so teammates see something before the original lands.
    public var thumbnail: Data?
    public var capturedAt: Date
    /// Length of a voice note.
    public var durationSeconds: Double?

    /// Creates a media attachment; give either `issueID` or `dailyLogID`.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        issueID: UUID? = nil, dailyLogID: UUID? = nil, kind: Kind, fileName: String, contentType: String,
        byteSize: Int64, sha256: String, thumbnail: Data? = nil, capturedAt: Date,
        durationSeconds: Double? = nil
    ) {
        self.id = id
        self.sync = sync
        self.issueID = issueID
        self.dailyLogID = dailyLogID
        self.kind = kind
        self.fileName = fileName
        self.contentType = contentType
        self.byteSize = byteSize
        self.sha256 = sha256
        self.thumbnail = thumbnail
        self.capturedAt = capturedAt
        self.durationSeconds = durationSeconds
    }
}
