import Foundation

/// How much of a media file the server holds, so an interrupted upload resumes from there
/// instead of starting over.
public struct MediaUploadStatus: Sendable, Hashable, Codable {
    /// The media attachment record the file belongs to.
    public var attachmentID: UUID
    /// Bytes received so far: the offset the next chunk must start at.
    public var receivedBytes: Int64
    /// The file's full size, once announced by a first chunk (or known from the attachment record).
    public var totalBytes: Int64?
    /// True once every byte arrived and the SHA-256 matched.
    public var complete: Bool
    /// Once complete: the checkpoint of the change the finished upload took, which the device keeps
    /// as its own (`PullResponse.checkpoint`), so a server restored to a backup taken before the file
    /// arrived answers `history_changed` and the file is sent again. Absent from older servers and for
    /// uploads finished before they gave one.
    public var checkpoint: String?

    /// Creates a status.
    public init(attachmentID: UUID, receivedBytes: Int64, totalBytes: Int64?, complete: Bool, checkpoint: String? = nil) {
        self.attachmentID = attachmentID
        self.receivedBytes = receivedBytes
        self.totalBytes = totalBytes
        self.complete = complete
        self.checkpoint = checkpoint
    }
}
