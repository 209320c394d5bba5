/// The two encodings of the same pre-sync bundle content, chosen with the bundle route's `format`
/// query parameter. A zip container holds one manifest in either.
public enum BundleFormat: String, Sendable, Hashable, Codable, CaseIterable {
    case json, xml

    /// The bundle format version this build reads and writes; a newer one is refused rather than half-read.
    public static let currentVersion = 1
}
