import OutpostWire

extension BundleFormat {
    /// The format versions this build reads: version 1, and version 2, which adds the header's
    /// `checkpoints`. A version 1 bundle imports as it always did, with no checkpoint to confirm.
    static let readableVersions = 1...BundleFormat.currentVersion

    static var readableVersionsText: String {
        readableVersions.map(String.init).joined(separator: " and ")
    }
}

/// The rules for a bundle header's `checkpoints` (format version 2): each a checkpoint the server wrote
/// (`<sequence>.<16 lowercase hex digits>`, as the sync API's `checkpoint`), at most `maximumCount`.
/// The bundle package never reads them; it carries them from the writer to the importing device.
public enum BundleCheckpoints {
    /// How many a header may carry; a device refuses an import that would leave it more to confirm.
    public static let maximumCount = 64

    /// Why `texts` cannot be a header's checkpoints, nil when they can.
    static func firstInvalid(in texts: [String]) -> String? {
        if texts.count > maximumCount { return "at most \(maximumCount) checkpoints, not \(texts.count)" }
        return texts.first { !isValid($0) }.map { "'\($0.prefix(40))' is not a checkpoint the server wrote" }
    }

    /// Whether `text` has a checkpoint's form: exactly what the server writes, as the server itself
    /// reads it (`SyncProtocol.checkpointParts`).
    public static func isValid(_ text: String) -> Bool {
        SyncProtocol.checkpointParts(text) != nil
    }
}
