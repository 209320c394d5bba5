import Foundation

/// Asks what the server kept for changes this device sent and never heard back about (`POST
/// /push/answers`): the answer to a push can be lost after the server applied it. A pull cannot tell
/// such a change from one the server never saw, so a teammate's later edit made on top of it read as
/// concurrent, and the device offered its own taken value as lost or, under client wins, sent it again
/// over the edit (attack 103, F1). The device asks before it pulls; the server answers each key it
/// applied for this caller, in a project the caller still sees, as the push answered it
/// (`MutationOutcome.duplicate`), and leaves every other key out, so an answer never tells whether
/// another user's key exists.
public struct PushAnswersRequest: Sendable, Hashable, Codable {
    /// The idempotency keys of the changes sent without an answer, at most `maximumKeys`.
    public var idempotencyKeys: [UUID]

    /// Creates a request.
    public init(idempotencyKeys: [UUID]) {
        self.idempotencyKeys = idempotencyKeys
    }

    /// The most keys one request names: a push batch's default size, so one request covers a batch
    /// whose answer was lost.
    public static let maximumKeys = 500
}
