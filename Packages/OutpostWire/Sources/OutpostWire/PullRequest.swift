import Foundation

/// Asks for the changes after a cursor, one bounded page at a time, so a device catches up
/// incrementally and saves its cursor only after a page is applied.
public struct PullRequest: Sendable, Hashable, Codable {
    /// The `nextCursor` of the last applied page; nil to start from the beginning.
    public var cursor: String?
    /// The most changes to return; the server may return fewer (it caps at its `maximumPullLimit`).
    public var limit: Int
    /// Only these projects' records; nil for every project the caller belongs to.
    public var projects: [UUID]?
    /// Whether a record may come with the clock most of its fields carry once (`clock`), and in
    /// `clocks` only the others': clocks were 40 % of a page's JSON. Only a client that reads it may ask.
    public var acceptsSharedClock: Bool
    /// The last `checkpoint` the server gave this device (`PullResponse.checkpoint`,
    /// `PushResponse.checkpoint`): a server whose history no longer holds it (restored from a backup)
    /// answers 409 `history_changed` instead of pages that would skip its new changes. Nil before any.
    public var checkpoint: String?
    /// Where bundles this device downloaded from this server left their projects, as
    /// `<project id>=<checkpoint>` (`SyncProtocol.bundlePositionParts`): a project the cursor does not
    /// name yet is then read from there, not from its beginning, so a pre-synced device's first sync
    /// pulls only what changed after its bundle was made. A position whose checkpoint the server's
    /// history does not hold is left out, and that project read from its beginning. Empty for none.
    public var bundlePositions: [String]
    /// The change sequences this device's own pushes took (`MutationResult.sequence`), as
    /// `SequenceRanges` text: a record whose latest change is one of them comes back as its version only
    /// (`PullResponse.ownRecords`), since the device holds it already. Empty for none.
    public var ownSequences: [String]
    /// Projects to read again from their beginning, whatever the cursor says of them: a bundle FILE
    /// imported into this device brought records as its word, and only a read of the whole project
    /// tells which of them the server holds (`LocalStore.settleRereadImports`). A project the caller is
    /// not a member of is left as the cursor names it, as any made-up id is. Send them with the first
    /// request of a pull only. Empty for none.
    public var rereadProjects: [UUID]

    /// Creates a request. This package reads both clock forms, so it asks for the shared one by default.
    public init(
        cursor: String?, limit: Int, projects: [UUID]? = nil, acceptsSharedClock: Bool = true, checkpoint: String? = nil,
        bundlePositions: [String] = [], ownSequences: [String] = [], rereadProjects: [UUID] = []
    ) {
        self.ownSequences = ownSequences
        self.rereadProjects = rereadProjects
        self.cursor = cursor
        self.limit = limit
        self.projects = projects
        self.acceptsSharedClock = acceptsSharedClock
        self.checkpoint = checkpoint
        self.bundlePositions = bundlePositions
    }

    private enum CodingKeys: String, CodingKey {
        case cursor, limit, projects, acceptsSharedClock, checkpoint, bundlePositions, ownSequences, rereadProjects
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        cursor = try container.decodeIfPresent(String.self, forKey: .cursor)
        limit = try container.decode(Int.self, forKey: .limit)
        projects = try container.decodeIfPresent([UUID].self, forKey: .projects)
        // Absent from older clients, which read `clocks` only.
        acceptsSharedClock = try container.decodeIfPresent(Bool.self, forKey: .acceptsSharedClock) ?? false
        checkpoint = try container.decodeIfPresent(String.self, forKey: .checkpoint)
        bundlePositions = try container.decodeIfPresent([String].self, forKey: .bundlePositions) ?? []
        ownSequences = try container.decodeIfPresent([String].self, forKey: .ownSequences) ?? []
        rereadProjects = try container.decodeIfPresent([UUID].self, forKey: .rereadProjects) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(cursor, forKey: .cursor)
        try container.encode(limit, forKey: .limit)
        try container.encodeIfPresent(projects, forKey: .projects)
        // Left out when false, so the request reads as one from before the option existed.
        if acceptsSharedClock { try container.encode(true, forKey: .acceptsSharedClock) }
        try container.encodeIfPresent(checkpoint, forKey: .checkpoint)
        // Left out when empty; a server from before positions ignores them, and the pull reads from the start.
        if !bundlePositions.isEmpty { try container.encode(bundlePositions, forKey: .bundlePositions) }
        if !ownSequences.isEmpty { try container.encode(ownSequences, forKey: .ownSequences) }
        // Left out when empty; a server from before it reads on from the cursor, and the device settles nothing.
        if !rereadProjects.isEmpty { try container.encode(rereadProjects, forKey: .rereadProjects) }
    }
}
