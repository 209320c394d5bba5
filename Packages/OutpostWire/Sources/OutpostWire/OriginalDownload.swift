import Foundation

/// What one download of an attachment's original (`GET /media/{attachmentID}`) brought: how much the
/// partial file holds now, how much of that came in this call, and the server's SHA-256 of the whole
/// file. A download cut off part way is resumed by calling again with the same file.
public struct OriginalDownload: Sendable, Hashable {
    /// The whole file's size, as the server holds it.
    public var totalBytes: Int64
    /// The bytes the partial file holds now; `totalBytes` once the download is whole.
    public var heldBytes: Int64
    /// The bytes this call received; what it resumed from was held already.
    public var receivedBytes: Int64
    /// The server's SHA-256 of the whole file (`Outpost-Media-SHA256`), 64 lowercase hex digits.
    public var sha256: String

    /// Creates a download's outcome.
    public init(totalBytes: Int64, heldBytes: Int64, receivedBytes: Int64, sha256: String) {
        self.totalBytes = totalBytes
        self.heldBytes = heldBytes
        self.receivedBytes = receivedBytes
        self.sha256 = sha256
    }

    /// Whether the partial file holds the whole original.
    public var isWhole: Bool { heldBytes == totalBytes }
}
