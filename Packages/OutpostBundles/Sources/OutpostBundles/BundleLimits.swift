import OutpostSchema

/// The bounds a bundle must keep, so hostile input can cost neither unbounded memory nor unbounded time.
/// The defaults fit a project of millions of records; lower them for untrusted sources.
public struct BundleLimits: Sendable, Hashable {
    /// The largest manifest document (XML or JSON), in bytes.
    public var maximumDocumentBytes: Int64 = 8 << 30
    /// The deepest element or value nesting; a valid bundle needs 4 (XML) or 5 (JSON).
    public var maximumDepth = 16
    /// The longest single text value, attribute or field, in bytes (a 64 KiB thumbnail is 88 KiB of base64).
    public var maximumStringBytes = EntityRecord.maximumTextBytes
    /// The most members of one JSON object (a record has at most 8, its fields at most 10), and the
    /// most attributes of one XML element, namespace declarations and `xsi:` attributes included (the
    /// format declares at most 6).
    public var maximumObjectMembers = 64
    /// The most entries a zip container may hold.
    public var maximumArchiveEntries = 100_000
    /// The most bytes a zip container may expand to, all entries together.
    public var maximumExpandedBytes: Int64 = 16 << 30
    /// The highest expanded-to-compressed ratio an entry may have (a zip bomb's is in the thousands).
    public var maximumCompressionRatio: Int64 = 200
    /// How many located errors validation collects before it stops looking.
    public var maximumReportedErrors = 100

    /// The defaults.
    public init() {}

    /// The defaults, by name at the call site.
    public static let standard = BundleLimits()
}
