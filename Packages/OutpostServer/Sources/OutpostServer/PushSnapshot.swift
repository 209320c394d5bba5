import Foundation
import OutpostSchema
import OutpostWire

// The storage seam of a push. The rules (`PushRules`) never touch a database: a backend loads, in a
// few queries per batch, a `PushSnapshot` of what the batch touches (named by `PushBatch`), the rules
// run in memory against it and return a `PushPlan`, and the backend writes the plan, all inside one
// transaction that holds the change counters from the first read to the commit (SQLite: the write
// transaction; PostgreSQL: a transaction-level advisory lock taken before anything else is read), so
// sequence numbers commit in order and the snapshot cannot go stale.

/// A record's identity: its entity and client id.
struct RecordKey: Sendable, Hashable {
    let entity: EntityType
    let id: UUID
}

/// A parent named by the server id it was assigned in `--server-ids` mode.
struct ServerIDKey: Sendable, Hashable {
    let entity: EntityType
    let serverID: Int64
}

/// What access control and reference checks need of a stored record, without its fields: cheap to
/// load (no JSON), enough to learn that it exists, where it belongs and where it sits in the sequence.
struct RecordSummary: Sendable, Hashable {
    var key: RecordKey
    var serverID: Int64?
    /// nil only for an opportunity no project names yet (it then belongs to `ownerID`).
    var projectID: UUID?
    var ownerID: UUID
    var sequence: Int64
}

/// A push's target as first found, without its contents: where it belongs, and whether and when it was
/// deleted, which tell whether the caller may see it (`PushBatch.targetsToRead`).
struct TargetSummary: Sendable, Hashable {
    var summary: RecordSummary
    var deleted: Bool
    /// Milliseconds since 1970, as stored.
    var updatedAt: Int64
}

/// An idempotency key's stored answer.
struct AppliedMutation: Sendable, Hashable {
    var userID: UUID
    /// The record the change was of: a key names one change of one record.
    var entity: String
    var recordID: String
    /// The original outcome as the wire's JSON.
    var outcome: String
    /// What the change wrote (`ChangeDigest`); nil for a key kept before servers noted it.
    var changeDigest: String?
}

/// The batch as the backend sees it: what to load before the rules run. Loading is two rounds, since
/// the records the batch changes name parents of their own (an update keeps its stored parents).
struct PushBatch: Sendable {
    let mutations: [PushMutation]
    let caller: Caller
    let now: Date

    /// Every idempotency key of the batch (round 1: their stored answers, if any).
    var idempotencyKeys: [UUID] { mutations.map(\.idempotencyKey) }

    /// Whether a mutation may create a project (and so its creator's member record).
    var createsProjects: Bool { mutations.contains { $0.entity == ServedSchema.current.scope && $0.operation == .create } }

    /// The records the mutations change (round 1: full records, fields and clocks included).
    var targets: Set<RecordKey> { Set(mutations.map { RecordKey(entity: $0.entity, id: $0.recordID) }) }

    /// Project ids the batch creates or changes (round 1: which of them have members at all).
    var projects: Set<UUID> { Set(mutations.lazy.filter { $0.entity == ServedSchema.current.scope }.map(\.recordID)) }

    /// The projects the batch names itself, before anything is read: its project records, and the scope
    /// references in its records' fields. For the pushes-in-progress gauge, which counts a push while
    /// it waits for the writers' lock, so it cannot look the rest up (an update naming no project).
    var namedProjects: Set<UUID> {
        let schema = ServedSchema.current
        var named = Set<UUID>()
        for mutation in mutations {
            if mutation.entity == schema.scope { named.insert(mutation.recordID) }
            for parent in EntityCatalog.schema.entity(mutation.entity)?.parents ?? [] where parent.entity == schema.scope {
                if case .uuid(let project)? = mutation.fields[parent.field] { named.insert(project) }
            }
        }
        return named
    }

    /// The most bytes of stored records (their fields and clocks as stored) a push of more than one
    /// mutation may change. Each target is read whole before the rules run: one member's 110 KB push of
    /// 400 one-field edits of issues holding 3 MiB of text each took the server from 0.4 to 3.8 GB, and
    /// left 2 GB taken (attack 118, F4). Past it the push is refused whole (413 `batch_too_large`,
    /// nothing applied) and a device sends halves, down to one mutation, which this never refuses, as
    /// for `PushRules.maximumAnswerRecordBytes`. Twice that bound: a conflict answers with its record.
    static let maximumTargetBytes = 32 << 20

    /// Of the batch's targets as stored, the ones to read whole: those the caller may see, by the rule
    /// the push rules answer by (`RecordSummary.isVisible`, and not deleted before the caller joined its
    /// project: `ProjectAccess.deletedBeforeJoining`). Any other is answered as a record that does not
    /// exist, so its contents are never read, nor weighed (`weigh`): a refusal weighed with another
    /// project's records, or a tombstone's last values, would tell which ids exist and how big they are.
    func targetsToRead(among stored: [TargetSummary], access: ProjectAccess) -> Set<RecordKey> {
        Set(stored.lazy.filter { target in
            target.summary.isVisible(to: self.caller, memberships: access.projects)
                && !access.deletedBeforeJoining(target.summary.projectID, deleted: target.deleted, updatedAt: target.updatedAt)
        }.map(\.summary.key))
    }

    /// Adds a target's `bytes` (its fields and clocks as stored) to `total`, and throws 413
    /// `batch_too_large` once the targets to read pass `maximumTargetBytes`: weighed as they are found,
    /// a backend reads no further than the bound.
    func weigh(_ bytes: Int, into total: inout Int) throws(ServerError) {
        total += bytes
        guard mutations.count == 1 || total <= Self.maximumTargetBytes else {
            throw ServerError(
                status: 413, .batchTooLarge,
                "the records this push changes hold more than \(Self.maximumTargetBytes >> 20) MiB: send fewer mutations at once")
        }
    }

    /// The records the batch refers to, given the targets as stored (round 2: summaries of those that
    /// exist, for client ids and for server ids alike). Includes the targets' stored parents and the
    /// opportunity a project names, which a project may adopt.
    func references(stored: [RecordKey: StoredRecord]) -> (keys: Set<RecordKey>, serverIDs: Set<ServerIDKey>) {
        var keys = Set<RecordKey>()
        var serverIDs = Set<ServerIDKey>()
        func collect(_ fields: [String: FieldValue], of entity: EntityType) {
            for relation in entity.description.parents {
                switch fields[relation.field] ?? .null {
                case .uuid(let id): keys.insert(RecordKey(entity: relation.entity, id: id))
                case .text(let text):
                    if let serverID = Int64(text) { serverIDs.insert(ServerIDKey(entity: relation.entity, serverID: serverID)) }
                default: break
                }
            }
        }
        for mutation in mutations { collect(mutation.fields, of: mutation.entity) }
        for record in stored.values { collect(record.fields, of: record.entity) }
        return (keys, serverIDs)
    }
}

/// What the backend loaded for a batch; the rules read it and, for each mutation they apply, update
/// it so later mutations of the batch see earlier ones' results. A refused mutation leaves it as it was.
struct PushSnapshot: Sendable {
    /// This server's salt for member record ids, read when the batch creates a project (its creator's
    /// member record is written with it).
    var memberIDSalt = ""
    /// Stored answers of the batch's idempotency keys.
    var applied: [UUID: AppliedMutation] = [:]
    /// The batch's targets that exist, whole.
    var records: [RecordKey: StoredRecord] = [:]
    /// Every referenced record that exists (targets may be here too).
    var summaries: [RecordKey: RecordSummary] = [:]
    /// Referenced server ids that exist, to the record holding them.
    var serverIDs: [ServerIDKey: RecordKey] = [:]
    /// The caller's standing in each project they belong to (`Roles.access`): only projects where a role
    /// is established count, whatever the memberships table says.
    var access = ProjectAccess()
    /// Of `PushBatch.projects`, those with at least one member.
    var projectsWithMembers: Set<UUID> = []
    /// Of the caller's projects, those an operator archived: they take no more changes.
    var archivedProjects: Set<UUID> = []
    /// The caller's display name, for the member record that makes them the owner of a project they create.
    var callerName = ""
    /// The bytes of fields and clocks each target the caller may see holds as stored (what `weigh` read)
    /// and who wrote it last, and the same of each record the batch wrote: what a change of it adds to
    /// the records quotas is told from it.
    var storedBytes: [RecordKey: StoredSize] = [:]
    /// The bytes the records of the caller's projects and of the targets' projects hold, and those the
    /// caller wrote last (`record_usage`), for the records quotas; a holder with no row holds none.
    var recordBytes: [RecordBytesHolder: Int64] = [:]

    /// The projects the caller may reach.
    var memberships: Set<UUID> { access.projects }
    /// The counters' values when loaded: the last change sequence and the last server id handed out.
    var changeSequence: Int64 = 0
    var lastServerID: Int64 = 0

    /// A referenced record: the batch's own state first, then the loaded summary.
    func summary(_ key: RecordKey) -> RecordSummary? {
        records[key].map(\.summary) ?? summaries[key]
    }
}

/// A stored record's fields and clocks in bytes, and whose quota they count against: the member whose
/// push wrote it last, or its creator for the office's writes (`coalesce(written_by, owner_id)`).
struct StoredSize: Sendable, Hashable {
    var bytes: Int
    var writer: UUID
}

/// Whose records a row of `record_usage` counts: a project's, or those a member wrote last.
enum RecordBytesHolder: Hashable, Sendable {
    case project(UUID)
    case writer(UUID)

    /// The projects a push's quota checks may ask about: those the caller may reach (any new record goes
    /// into one of them, or into one the batch creates, which holds nothing yet) and those of the stored
    /// targets. The caller's own row is the only writer's asked: another member's total is never told.
    static func asked(access: ProjectAccess, stored: [TargetSummary]) -> [String] {
        var projects = access.projects
        for target in stored { if let project = target.summary.projectID { projects.insert(project) } }
        return projects.map(\.storageText)
    }

    /// A row read back, nil for a holder this build does not write.
    init?(holder: String, id: String) {
        guard let id = UUID(hyphenatedText: id) else { return nil }
        switch holder {
        case "project": self = .project(id)
        case "writer": self = .writer(id)
        default: return nil
        }
    }
}

struct PushPlan: Sendable {
    var results: [MutationResult] = []
    /// Final state of every record the batch created or changed, in sequence order when written.
    var records: [RecordKey: StoredRecord] = [:]
    /// Records the batch only moved (an opportunity a project adopted): new project and sequence.
    var moves: [RecordKey: (projectID: UUID, sequence: Int64)] = [:]
    /// New (project, user) memberships: the creator of a project (whose member record, naming them its
    /// owner, is among `records`).
    var memberships: [(projectID: UUID, userID: UUID)] = []
    /// Members the batch gave a role again, who had none (their member record deleted, or naming no role
    /// this server knows): their membership begins again now (`Access.restartMembership`), so what was
    /// deleted while they reached nothing stays as unknown to them as to a member who joins later.
    var roleRestarts: [(projectID: UUID, userID: UUID)] = []
    /// New idempotency answers, in order (duplicates and other users' keys write none).
    var applied: [(key: UUID, userID: UUID, entity: EntityType, recordID: UUID, outcome: String, changeDigest: String)] = []
    /// The counters' values after the batch.
    var changeSequence: Int64 = 0
    var lastServerID: Int64 = 0
    /// Set when the batch prunes the caller's idempotency answers: keep their newest `count`
    /// (`PushRules.answersKeptPerUser`), by `applied_at`; answers of the same instant as the last kept stay.
    var answersToKeep: (userID: UUID, count: Int)?
}

extension StoredRecord {
    var key: RecordKey { RecordKey(entity: entity, id: id) }

    var summary: RecordSummary {
        RecordSummary(key: key, serverID: serverID, projectID: projectID, ownerID: ownerID, sequence: sequence)
    }
}

extension RecordSummary {
    /// A record belongs to its project's members; an opportunity no project references yet, to its creator.
    func isVisible(to caller: Caller, memberships: Set<UUID>) -> Bool {
        guard let projectID else { return ownerID == caller.userID }
        return memberships.contains(projectID)
    }
}
