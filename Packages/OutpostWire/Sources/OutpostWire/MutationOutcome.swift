/// What the server did with one mutation. On the wire a flat object whose `status` names the case.
public indirect enum MutationOutcome: Sendable, Hashable, Codable {
    /// Applied; the record is now at `version`, and the server may have assigned its own id.
    case applied(version: Int64, serverID: String?)
    /// The key was applied before; `original` is the answer given then (never itself a duplicate).
    case duplicate(original: MutationOutcome)
    /// The base version was stale; the server's current record comes back for the conflict policy to merge.
    case conflict(serverRecord: ServerRecord)
    /// Refused for good, with the server's stable code and message (a validation failure, say).
    case rejected(reason: ErrorBody)

    /// The outcome that counts, looking through a duplicate to the original answer.
    public var unwrapped: MutationOutcome {
        if case .duplicate(let original) = self { return original.unwrapped }
        return self
    }

    /// The `status` text on the wire.
    public var status: String {
        switch self {
        case .applied: "applied"
        case .duplicate: "duplicate"
        case .conflict: "conflict"
        case .rejected: "rejected"
        }
    }

    private enum CodingKeys: String, CodingKey {
        case status, version, serverID, serverRecord, reason, original
    }

    public init(from decoder: any Decoder) throws {
        try self.init(from: decoder, allowingDuplicate: true)
    }

    private init(from decoder: any Decoder, allowingDuplicate: Bool) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let status = try container.decode(String.self, forKey: .status)
        switch status {
        case "applied":
            self = .applied(
                version: try container.decode(Int64.self, forKey: .version),
                serverID: try container.decodeIfPresent(String.self, forKey: .serverID))
        case "duplicate" where allowingDuplicate:
            let nested = try container.superDecoder(forKey: .original)
            self = .duplicate(original: try MutationOutcome(from: nested, allowingDuplicate: false))
        case "conflict":
            self = .conflict(serverRecord: try container.decode(ServerRecord.self, forKey: .serverRecord))
        case "rejected":
            self = .rejected(reason: try container.decode(ErrorBody.self, forKey: .reason))
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .status, in: container,
                debugDescription: "'\(status)' is not a mutation status here (applied, duplicate, conflict, rejected; "
                    + "an original is never a duplicate).")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        switch self {
        case .applied(let version, let serverID):
            try container.encode(version, forKey: .version)
            try container.encodeIfPresent(serverID, forKey: .serverID)
        case .duplicate(let original):
            try container.encode(original, forKey: .original)
        case .conflict(let serverRecord):
            try container.encode(serverRecord, forKey: .serverRecord)
        case .rejected(let reason):
            try container.encode(reason, forKey: .reason)
        }
    }
}
