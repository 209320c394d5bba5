import Foundation

/// The server's answer for one mutation of a push, found by its idempotency key.
public struct MutationResult: Sendable, Hashable, Codable {
    /// The key of the mutation this answers.
    public var idempotencyKey: UUID
    /// What happened to it.
    public var outcome: MutationOutcome

    /// Creates a result.
    public init(idempotencyKey: UUID, outcome: MutationOutcome) {
        self.idempotencyKey = idempotencyKey
        self.outcome = outcome
    }

    private enum CodingKeys: String, CodingKey {
        case idempotencyKey
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        idempotencyKey = try container.decode(UUID.self, forKey: .idempotencyKey)
        outcome = try MutationOutcome(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(idempotencyKey, forKey: .idempotencyKey)
        try outcome.encode(to: encoder)
    }
}
