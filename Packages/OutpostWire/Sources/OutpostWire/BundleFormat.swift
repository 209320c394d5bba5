/// The two encodings of the same pre-sync bundle content, chosen with the bundle route's `format`
/// query parameter. A zip container holds one manifest in either.
public enum BundleFormat: String, Sendable, Hashable, Codable, CaseIterable {
    case json, xml

    /// The bundle format version this build writes. It reads this one and every earlier one (version 2
    /// added the header's checkpoints); a newer one is refused rather than half-read.
    public static let currentVersion = 2
}
