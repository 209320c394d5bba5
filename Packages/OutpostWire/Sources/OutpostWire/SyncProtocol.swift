import Foundation
import OutpostConflicts
import OutpostSchema

/// The constants of the sync protocol that both ends must agree on; `schemas/sync-api.yaml` is
/// the full contract.
public enum SyncProtocol {
    /// The protocol version this client speaks, sent on every request so a server never misreads a payload.
    public static let version = 1

    /// Header carrying `version` on every request and response.
    public static let protocolVersionHeader = "Outpost-Protocol-Version"

    /// A checkpoint's sequence and mark, read from its text exactly as the server writes it
    /// (`<sequence>.<16 lowercase hex digits>`, the sequence ASCII digits with no sign or leading zero);
    /// nil for any other text. The one reading of that form, for the server that takes checkpoints
    /// back and the bundles that carry them (the server's "0", no change yet, is its own case).
    public static func checkpointParts(_ text: String) -> (sequence: Int64, mark: String)? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count <= 18, let first = parts[0].first, first != "0",
            parts[0].allSatisfy({ ("0"..."9").contains($0) }), let sequence = Int64(parts[0]), parts[1].count == 16,
            parts[1].allSatisfy({ ("0"..."9").contains($0) || ("a"..."f").contains($0) })
        else { return nil }
        return (sequence, String(parts[1]))
    }

    /// Whether `text` is a checkpoint of the protocol's form: `checkpointParts` reads it, or it is `0` (an
    /// answer given before any change the caller was told of).
    public static func isCheckpoint(_ text: String) -> Bool {
        text == "0" || checkpointParts(text) != nil
    }

    /// The versions a server gives a record: from 1, one more a change, and no further than JSON's
    /// integers are exact (2^53 − 1). A device takes no other from a server: a pulled record with another
    /// is quarantined, and a push answer naming another settles nothing (Int64.max stored made every
    /// real version after it look older; 0 or below sent the same batch again and again).
    public static let recordVersions: ClosedRange<Int64> = 1...((1 << 53) - 1)

    /// The most bundle positions one pull request may carry (`PullRequest.bundlePositions`).
    public static let maximumBundlePositions = 64

    /// The most projects one pull request may ask to read again (`PullRequest.rereadProjects`).
    public static let maximumRereadProjects = 64

    /// The project and checkpoint of a bundle position (`<project id>=<checkpoint>`, the id as a UUID's
    /// 36 characters, the checkpoint as `checkpointParts` reads it); nil for any other text.
    public static func bundlePositionParts(_ text: String) -> (project: UUID, sequence: Int64, mark: String)? {
        guard let equals = text.firstIndex(of: "="), text.distance(from: text.startIndex, to: equals) == 36,
            let project = UUID(uuidString: String(text[..<equals])),
            let (sequence, mark) = checkpointParts(String(text[text.index(after: equals)...]))
        else { return nil }
        return (project, sequence, mark)
    }

    /// Header carrying the client's local schema version on every request.
    public static let schemaVersionHeader = "Outpost-Schema-Version"

    /// Header carrying the SHA-256 (lowercase hex) a media upload must have once complete.
    public static let mediaDigestHeader = "Outpost-Media-SHA256"

    /// Header a server sets on every response, naming the optional forms it reads (comma-separated), so
    /// a client sends a form only to a server that said it reads it.
    public static let acceptsHeader = "Outpost-Accepts"

    /// The `acceptsHeader` token of a server that reads a push mutation's one shared `clock`
    /// (`PushRequest.json(sharingClocks:)`).
    public static let sharedClockForm = "shared-clock"

    /// Header a server sets on every response, naming its conflict policy (`conflictPolicyText`), so a
    /// device that settles conflicts differently stops before it pushes (`SyncPause.conflictPolicyMismatch`).
    public static let conflictPolicyHeader = "Outpost-Conflict-Policy"

    /// A policy as `conflictPolicyHeader` carries it: `default` when every entity keeps the catalog's
    /// strategy, else its overrides as `entity=strategy` pairs sorted by entity, comma-separated
    /// (`issue=lastWriteWins,discount=manual` sorted).
    public static func conflictPolicyText(_ policy: ConflictPolicy) -> String {
        let overrides = policy.overrides.map { "\($0.key.rawValue)=\($0.value.name.rawValue)" }.sorted()
        return overrides.isEmpty ? "default" : overrides.joined(separator: ",")
    }

    /// Reads `conflictPolicyText`; nil when it is not such a text. An entity this client does not know
    /// is skipped (it never sends one); a strategy it does not know makes the whole text unreadable.
    /// `strict`, for what a person typed (`--conflict-policy`): an unknown entity or one named twice
    /// makes it unreadable too, so a typo never runs another policy than the one meant.
    public static func conflictPolicy(fromText text: String, strict: Bool = false) -> ConflictPolicy? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "default" { return ConflictPolicy() }
        var overrides: [EntityType: ConflictStrategy] = [:]
        for pair in trimmed.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let name = ConflictPolicyName(rawValue: parts[1]) else { return nil }
            guard let entity = EntityType(rawValue: parts[0]) else {
                if strict { return nil }
                continue
            }
            if strict, overrides[entity] != nil { return nil }
            overrides[entity] = ConflictStrategy(name)
        }
        return ConflictPolicy(overriding: overrides)
    }

    /// Bodies above this size (10 KB) travel gzip-compressed; smaller ones are not worth the CPU.
    public static let compressionThreshold = 10 * 1024
}
