import Foundation

/// The server's answer for one mutation of a push, found by its idempotency key.
public struct MutationResult: Sendable, Hashable, Codable {
    /// The key of the mutation this answers.
    public var idempotencyKey: UUID
    /// What happened to it.
    public var outcome: MutationOutcome
    /// For an applied mutation, the change sequence it took: the device sends it back with its next
    /// pull (`PullRequest.ownSequences`), which then brings only the version of a record whose latest
    /// change this is, not its fields again. Absent otherwise, and from older servers.
    public var sequence: Int64?

    /// Creates a result.
    public init(idempotencyKey: UUID, outcome: MutationOutcome, sequence: Int64? = nil) {
        self.idempotencyKey = idempotencyKey
        self.outcome = outcome
        self.sequence = sequence
    }

    private enum CodingKeys: String, CodingKey {
        case idempotencyKey, sequence
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        idempotencyKey = try container.decode(UUID.self, forKey: .idempotencyKey)
        sequence = try container.decodeIfPresent(Int64.self, forKey: .sequence)
        outcome = try MutationOutcome(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(idempotencyKey, forKey: .idempotencyKey)
        try container.encodeIfPresent(sequence, forKey: .sequence)
        try outcome.encode(to: encoder)
    }
}
