import Foundation
import OutpostSchema

/// One page of changes in server sequence order, tombstones included.
public struct PullResponse: Sendable, Hashable, Codable {
    /// Changed records, each once with its latest state, ordered by `sequence`.
    public var changes: [ServerRecord]
    /// The cursor to save once this page is applied, and to send for the next page. Opaque text.
    public var nextCursor: String
    /// Whether more changes wait after this page.
    public var hasMore: Bool
    /// Projects the device had pulled (its cursor names them) whose member the caller no longer is:
    /// the device is told once, with the page whose cursor drops them, and keeps its unsent changes
    /// of them for its user to hand over (`LocalStore.unsentChanges()`). Absent when empty.
    public var leftProjects: [UUID]
    /// Where the server's history stands once this page was read (opaque text), to send with the next
    /// request: a server restored from a backup taken before it answers 409 `history_changed` (see
    /// `PullRequest.checkpoint`). Absent from older servers.
    public var checkpoint: String?
    /// Records of this page whose latest change is one of the request's `ownSequences`: the device's own
    /// accepted writes, sent as their versions only, never their fields again. Absent when empty.
    public var ownRecords: [OwnRecord]
    /// The request's `rereadProjects`, named back: this server reads them from their beginning (a
    /// project the caller is not a member of has nothing to read). Absent when the request named none,
    /// and from servers that do not read projects again, whose answer the device then settles nothing by.
    public var rereadProjects: [UUID]

    /// Creates a page.
    public init(
        changes: [ServerRecord], nextCursor: String, hasMore: Bool, leftProjects: [UUID] = [], checkpoint: String? = nil,
        ownRecords: [OwnRecord] = [], rereadProjects: [UUID] = []
    ) {
        self.ownRecords = ownRecords
        self.rereadProjects = rereadProjects
        self.changes = changes
        self.nextCursor = nextCursor
        self.hasMore = hasMore
        self.leftProjects = leftProjects
        self.checkpoint = checkpoint
    }

    private enum CodingKeys: String, CodingKey {
        case changes, nextCursor, hasMore, leftProjects, checkpoint, ownRecords, rereadProjects
    }

    /// Reads a page; `leftProjects` is absent from older servers' pages and from most pages.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        changes = try container.decode([ServerRecord].self, forKey: .changes)
        nextCursor = try container.decode(String.self, forKey: .nextCursor)
        hasMore = try container.decode(Bool.self, forKey: .hasMore)
        leftProjects = try container.decodeIfPresent([UUID].self, forKey: .leftProjects) ?? []
        checkpoint = try container.decodeIfPresent(String.self, forKey: .checkpoint)
        ownRecords = try container.decodeIfPresent([OwnRecord].self, forKey: .ownRecords) ?? []
        rereadProjects = try container.decodeIfPresent([UUID].self, forKey: .rereadProjects) ?? []
    }

    /// Writes a page, leaving `leftProjects` out when empty.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(changes, forKey: .changes)
        try container.encode(nextCursor, forKey: .nextCursor)
        try container.encode(hasMore, forKey: .hasMore)
        if !leftProjects.isEmpty { try container.encode(leftProjects, forKey: .leftProjects) }
        try container.encodeIfPresent(checkpoint, forKey: .checkpoint)
        if !ownRecords.isEmpty { try container.encode(ownRecords, forKey: .ownRecords) }
        if !rereadProjects.isEmpty { try container.encode(rereadProjects, forKey: .rereadProjects) }
    }
}

/// A record of a pull page whose latest change the asking device made itself (`PullResponse.ownRecords`):
/// where the change stands in the server's order, and the version it took.
public struct OwnRecord: Sendable, Hashable, Codable {
    /// The change's sequence, one of the request's `ownSequences`.
    public var sequence: Int64
    /// The record's entity.
    public var entity: EntityType
    /// The record's id.
    public var recordID: UUID
    /// The version the change took, which the device holds.
    public var version: Int64

    /// Creates one.
    public init(sequence: Int64, entity: EntityType, recordID: UUID, version: Int64) {
        self.sequence = sequence
        self.entity = entity
        self.recordID = recordID
        self.version = version
    }
}
