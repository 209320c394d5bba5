import OutpostWire

extension BundleFormat {
    /// The manifest's file name inside a zip container.
    var manifestName: String { "bundle.\(rawValue)" }
}
