import Foundation

/// One byte range of a media file, sent with `PUT` and `Content-Range`; the last chunk completes
/// the upload, and the server checks the whole file against `sha256`.
public struct MediaChunk: Sendable, Hashable {
    /// The media attachment record the file belongs to.
    public var attachmentID: UUID
    /// Where the chunk starts: the server's `receivedBytes`.
    public var offset: Int64
    /// The whole file's size.
    public var totalBytes: Int64
    /// The whole file's SHA-256, lowercase hex (the attachment record's `sha256`).
    public var sha256: String
    /// The chunk's bytes.
    public var data: Data

    /// Creates a chunk; `offset + data.count` must not pass `totalBytes`.
    public init(attachmentID: UUID, offset: Int64, totalBytes: Int64, sha256: String, data: Data) {
        precondition(offset >= 0 && offset + Int64(data.count) <= totalBytes, "chunk lies outside the file")
        self.attachmentID = attachmentID
        self.offset = offset
        self.totalBytes = totalBytes
        self.sha256 = sha256
        self.data = data
    }

    /// The `Content-Range` header value, `bytes first-last/total` (`bytes */total` for an empty file).
    public var contentRange: String {
        data.isEmpty
            ? "bytes */\(totalBytes)" : "bytes \(offset)-\(offset + Int64(data.count) - 1)/\(totalBytes)"
    }
}
