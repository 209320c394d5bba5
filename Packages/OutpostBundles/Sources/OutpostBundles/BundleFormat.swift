/// The two encodings of the same bundle content. A zip container holds one manifest in either.
public enum BundleFormat: String, Sendable, Hashable, CaseIterable {
    case xml
    case json

    /// The format version this build reads and writes; a newer one is refused rather than half-read.
    public static let currentVersion = 1

    /// The manifest's file name inside a zip container.
    var manifestName: String { "bundle.\(rawValue)" }
}
