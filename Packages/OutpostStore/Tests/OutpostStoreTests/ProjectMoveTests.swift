@testable import OutpostStore
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

private typealias Issue = OutpostModels.Issue
private typealias Comment = OutpostModels.Comment

extension EntityDescription {
    /// The parent a record belongs through (its first), as `PulledPage.project` follows it.
    fileprivate var owner: ParentRelation { parents[0] }
}

/// A record stays in its project, on the device as on the server (`PushRules`: "a record cannot move to
/// another project"). A server's version of a held record that names another project is refused into
/// the quarantine and the held record stays as it was: a hostile server's conflict answer moved a
/// device's own issue into a project its user was never in, and its lost values went to the conflicts
/// list (attack 101, F3).
@Suite(.fieldService) struct ProjectMoveTests {
    let server = NodeID(0xFEED)

    func remote(_ model: some Syncable, version: Int64, at milliseconds: Int64) -> VersionedRecord {
        remote(record: model.record, version: version, at: milliseconds)
    }

    /// Two projects, an issue and a comment on it in the first, and an issue in the second, all pulled.
    fileprivate struct Held {
        let store: LocalStore
        let database: TemporaryDatabase
        let first: Project
        let second: Project
        let issue: Issue
        let otherIssue: Issue
        let sibling: Issue
        let comment: Comment
    }

    fileprivate func held(alsoHoldingSecondProject: Bool = true) async throws -> Held {
        let database = try TemporaryDatabase()
        let store = try LocalStore.open(at: database.path)
        let first = Project(name: "Tower"), second = Project(name: "Depot")
        let issue = Issue(projectID: first.id, title: "Crack")
        let sibling = Issue(projectID: first.id, title: "Leak")
        let otherIssue = Issue(projectID: second.id, title: "Gate")
        let comment = Comment(issueID: issue.id, authorID: UUID(), body: "Seen at noon")
        var changes = [remote(first, version: 1, at: 1_000)]
        if alsoHoldingSecondProject { changes += [remote(second, version: 1, at: 1_000), remote(otherIssue, version: 1, at: 1_100)] }
        changes += [remote(issue, version: 1, at: 1_100), remote(sibling, version: 1, at: 1_100), remote(comment, version: 1, at: 1_200)]
        let report = try await store.applyPulledPage(PulledPage(changes: changes, cursor: "c-1"))
        #expect(report.quarantined == 0)
        return Held(
            store: store, database: database, first: first, second: second, issue: issue, otherIssue: otherIssue, sibling: sibling, comment: comment)
    }

    @Test(arguments: [true, false])
    func aPulledIssueNamingAnotherProjectIsRefused(holdingThatProject: Bool) async throws {
        let held = try await held(alsoHoldingSecondProject: holdingThatProject)
        var moved = held.issue
        moved.projectID = held.second.id
        moved.title = "Crack, moved"
        let report = try await held.store.applyPulledPage(PulledPage(changes: [remote(moved, version: 2, at: 2_000)], cursor: "c-2"))
        #expect(report.quarantined == 1)
        #expect(report.applied == 0)
        let stored = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        #expect(stored.projectID == held.first.id)
        #expect(stored.title == "Crack")
        #expect(stored.sync.version == 1)
        let quarantined = try held.store.quarantinedRecords()
        #expect(quarantined.map(\.recordID) == [held.issue.id])
        #expect(quarantined.first?.reason.contains("cannot move to another project") == true)
    }

    /// The attack's own path: the device's change of its issue waits, and the server's conflict answer
    /// names another project. The change stays queued and nothing is listed as lost.
    @Test func aConflictAnswerMovingAnIssueWithAChangeWaitingIsRefused() async throws {
        let held = try await held()
        var edited = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        edited.title = "Crack, wider"
        _ = try await held.store.save(edited)
        var moved = held.issue
        moved.projectID = held.second.id
        let report = try await held.store.merge(
            PulledPage(changes: [remote(moved, version: 4, at: 3_000)], cursor: nil), policy: ConflictPolicy(), now: Date())
        #expect(report.quarantined == 1)
        #expect(report.merged == 0)
        let stored = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        #expect(stored.projectID == held.first.id)
        #expect(stored.title == "Crack, wider")
        #expect(try held.store.unsentChanges().map(\.recordID) == [held.issue.id])
        #expect(try held.store.openConflicts().isEmpty)
    }

    /// The family, over every entity that belongs to a project through its parents: a held record's
    /// owning parent re-pointed at random to a record of the same kind in another project is refused and
    /// the held record stays; re-pointed to one in its own project, or left and other fields changed, the
    /// server's version is taken. Sometimes a local change of the record waits (the conflict path).
    @Test(arguments: 0..<4)
    func everyEntityStaysInItsProject(batch: Int) async throws {
        var random = SeededGenerator(seed: 0x9_1E0_0000 + UInt64(batch))
        let scope = EntityCatalog.schema.scope
        let belonging = EntityCatalog.all.filter { $0.type != scope && Self.belongsThroughParents($0.type) }
        #expect(belonging.count >= 10, "\(belonging.map(\.type))")
        for round in 0..<8 {
            let database = try TemporaryDatabase()
            let store = try LocalStore.open(at: database.path)
            let first = Project(name: "Tower"), second = Project(name: "Depot")
            let description = try #require(belonging.randomElement(using: &random))
            let held = Self.chain(description.type, in: first.id, using: &random)
            // Parents of the owner's kind to move under: the projects themselves for a record owned by one.
            let ownedByScope = description.owner.entity == scope
            let sameProject = ownedByScope ? [] : Self.chain(description.owner.entity, in: first.id, using: &random)
            let otherProject = ownedByScope ? [] : Self.chain(description.owner.entity, in: second.id, using: &random)
            let record = try #require(held.last)
            let setup = [first.record, second.record] + held.dropLast() + sameProject + otherProject + [record]
            let stored = try await store.applyPulledPage(
                PulledPage(changes: setup.map { remote(record: $0, version: 1, at: 1_000) }, cursor: "c-1"))
            #expect(stored.quarantined == 0, "round \(round): \(description.type)")

            var local = record
            local.sync = try #require(try store.record(description.type, id: record.id)).sync
            let waits = Bool.random(using: &random)
            if waits, let field = description.fields.first(where: { $0.kind == .text || $0.kind == .real }) {
                local[field.name] = field.kind == .text ? .text("edited here") : .real(4.5)
                _ = try? await store.save(local)
            }
            let before = try #require(try store.record(description.type, id: record.id))
            var changed = record
            let move = Int.random(in: 0..<3, using: &random)
            switch move {
            case 0: changed[description.owner.field] = .uuid(otherProject.last?.id ?? second.id)
            case 1: changed[description.owner.field] = .uuid(sameProject.last?.id ?? first.id)
            default: break
            }
            if let text = description.fields.first(where: { $0.kind == .text }) { changed[text.name] = .text("from the server") }
            let report = try await store.applyPulledPage(
                PulledPage(changes: [remote(record: changed, version: 2, at: 5_000)], cursor: "c-2"))
            let after = try #require(try store.record(description.type, id: record.id))
            let context = "round \(round): \(description.type), move \(move), waiting \(waits): \(report)"
            if move == 0 {
                #expect(report.quarantined == 1, "\(context)")
                #expect(after == before, "\(context)")
            } else {
                #expect(report.quarantined == 0, "\(context)")
                #expect(after[description.owner.field] == changed[description.owner.field], "\(context)")
                #expect(after.sync.version == 2, "\(context)")
            }
        }
    }

    /// The server's version `version` of `record`, stamped at `milliseconds` (deleted then, when asked).
    func remote(record: EntityRecord, version: Int64, at milliseconds: Int64, deleted: Bool = false) -> VersionedRecord {
        var record = record
        let at = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        record.sync = SyncMetadata(
            serverID: nil, version: version, createdAt: Date(timeIntervalSince1970: 1), updatedAt: at,
            deletedAt: deleted ? at : nil, syncStatus: .synced, isOrphaned: false)
        return VersionedRecord(
            record: record, stampedAt: HybridTimestamp(physicalMilliseconds: milliseconds, counter: 0, node: server))
    }

    /// Whether `entity`'s owning parents lead to the schema's scope (an opportunity's do not).
    static func belongsThroughParents(_ entity: EntityType) -> Bool {
        var current = entity
        for _ in 0..<EntityCatalog.all.count {
            guard let owner = current.description.parents.first else { return false }
            if owner.entity == EntityCatalog.schema.scope { return true }
            current = owner.entity
        }
        return false
    }

    /// A record of `entity` in `project` through its owning parents, after the ancestors it needs (each
    /// new). Fields hold a value of their kind; other parent references are empty where they may be.
    static func chain(_ entity: EntityType, in project: UUID, using random: inout SeededGenerator) -> [EntityRecord] {
        let description = entity.description
        let owner = description.owner
        let ancestors = owner.entity == EntityCatalog.schema.scope ? [] : chain(owner.entity, in: project, using: &random)
        var fields: [String: FieldValue] = [:]
        for field in description.fields { fields[field.name] = value(of: field.kind) }
        for relation in description.parents.dropFirst() {
            let optional = description.field(named: relation.field)?.isOptional ?? true
            fields[relation.field] = optional ? .null : .uuid(UUID())
        }
        fields[owner.field] = .uuid(ancestors.last?.id ?? project)
        let id = withUnsafeBytes(of: (random.next(), random.next())) { UUID(uuid: $0.load(as: uuid_t.self)) }
        return ancestors + [EntityRecord(entity: entity, id: id, fields: fields, sync: SyncMetadata(createdAt: Date(timeIntervalSince1970: 1)))]
    }

    static func value(of kind: FieldKind) -> FieldValue {
        switch kind {
        case .text: .text("x")
        case .day: .text("2026-12-04")
        case .sha256: .text(String(repeating: "ab", count: 32))
        case .choice(let allowed): .text(allowed.first ?? "")
        case .integer, .money, .count: .integer(1)
        case .real, .quantity: .real(1)
        case .bool: .bool(false)
        case .date: .date(Date(timeIntervalSince1970: 100))
        case .uuid: .uuid(UUID())
        case .blob: .blob(Data())
        }
    }

    /// The device's own write is held to the rule too, before anything is written: saved, the move went
    /// out, the server refused it for ever, and the record stood in the other project on this device only.
    @Test func aLocalSaveCannotMoveARecordToAnotherProject() async throws {
        let held = try await held()
        var issue = try #require(try held.store.fetch(Issue.self, id: held.issue.id))
        issue.projectID = held.second.id
        let refused = await #expect(throws: StoreError.self) { try await held.store.save(issue) }
        #expect(refused?.code == .invalidRecord, "\(String(describing: refused))")
        #expect(refused?.message.contains("cannot move to another project") == true, "\(String(describing: refused))")
        var comment = try #require(try held.store.fetch(Comment.self, id: held.comment.id))
        comment.issueID = held.otherIssue.id
        await #expect(throws: StoreError.self) { try await held.store.save(comment) }
        #expect(try held.store.fetch(Issue.self, id: held.issue.id)?.projectID == held.first.id)
        #expect(try held.store.fetch(Comment.self, id: held.comment.id)?.issueID == held.issue.id)
        #expect(try held.store.unsentChanges().isEmpty)
        // Within its project, a comment goes under another issue.
        comment.issueID = held.sibling.id
        #expect(try await held.store.save(comment).issueID == held.sibling.id)
        #expect(try held.store.unsentChanges().map(\.recordID) == [held.comment.id])
    }

    /// A child moved under a parent of another project moves with it: refused too. Moved under another
    /// parent of its own project, it is the server's word, and taken.
    @Test func aCommentMovesOnlyWithinItsProject() async throws {
        let held = try await held()
        var across = held.comment
        across.issueID = held.otherIssue.id
        var report = try await held.store.applyPulledPage(PulledPage(changes: [remote(across, version: 2, at: 2_000)], cursor: "c-2"))
        #expect(report.quarantined == 1)
        #expect(try held.store.fetch(Comment.self, id: held.comment.id)?.issueID == held.issue.id)

        var within = held.comment
        within.issueID = held.sibling.id
        report = try await held.store.applyPulledPage(PulledPage(changes: [remote(within, version: 3, at: 3_000)], cursor: "c-3"))
        #expect(report.quarantined == 0)
        #expect(report.applied == 1)
        #expect(try held.store.fetch(Comment.self, id: held.comment.id)?.issueID == held.sibling.id)
    }
}
