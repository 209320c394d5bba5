import Foundation
import OutpostConflicts
import OutpostSchema

/// What an operator's `add-member` did, as `outpost admin add-member` reports it: never a silent no-op.
public enum MembershipChange: Sendable, Hashable, CustomStringConvertible {
    /// The user became a member with the role.
    case added(String)
    /// A member removed earlier came back, with the role (their member record too).
    case readded(String)
    /// A member's role changed.
    case roleChanged(from: String?, to: String)
    /// The user was already a member with that role; their member record's name or email changed.
    case detailsChanged(String)
    /// The user was already a member with that role.
    case unchanged(String)

    public var description: String {
        switch self {
        case .added(let role): "added as \(role)"
        case .readded(let role): "added back as \(role)"
        case .roleChanged(let from, let to): "role changed from \(from ?? "none") to \(to)"
        case .detailsChanged(let role): "already a member as \(role); name or email changed"
        case .unchanged(let role): "already a member as \(role); nothing changed"
        }
    }
}

/// The decision behind `add-member`, the same for both backends: given what the project holds for the
/// user, which records to write so that the user ends a member with exactly the role asked. The user's
/// member record (`Roles.memberRecordID`) is created, brought back from a tombstone (a removed member
/// added back: left a tombstone, the role once fell back to the owner's), or given the role; any other
/// live member record naming them is deleted, since the strongest of them would decide otherwise.
enum MembershipEdit {
    /// The refusal of a user the server has no name for, added with none: not found, as the user is not
    /// there yet (a body without a name is valid by the API document, for a user the server has).
    static func unnamed(_ user: UUID) -> ServerError {
        ServerError.notFound("no user \(user.storageText) on this server yet: give their name to add them")
    }

    /// What to write, at the change sequences after `sequence` (which it advances).
    struct Plan {
        var records: [StoredRecord] = []
        var addsMembership = false
        /// A member with no role is given one: their membership begins again (`Access.restartMembership`).
        var restartsMembership = false
        var change: MembershipChange
    }

    static func plan(
        user: UUID, project: UUID, name: String?, userName: String, email: String?, role asked: String?, hasMembership: Bool,
        memberRecords: [StoredRecord], salt: String, now: Date, rules: PushRules,
        counters: inout (changeSequence: Int64, lastServerID: Int64)
    ) throws(ServerError) -> Plan {
        let schema = ServedSchema.current
        let id = Roles.memberRecordID(project: project, user: user, salt: salt)
        let naming = memberRecords.filter { $0.fields[schema.userField] == .uuid(user) }
        let before = Roles.strongest(naming.filter { $0.deletion == nil }.compactMap { Roles.role(in: $0.fields, of: user) })
        // No role asked keeps a member's own: an operator correcting a name once demoted a foreman to
        // crew, reported only as "role changed" (attack finding 11 of stop 49). A new member, or one
        // added back, gets the default the schema declares (the field-service schema's crew; an app's
        // may be stronger than its weakest, as ContractorJobs' hand is above its client). A member with
        // no role (their member record deleted) has none to keep, and is given none unasked: crew is a
        // role the office never gave them (attack 46 finding 3).
        guard let role = asked ?? (hasMembership ? before : schema.defaultRole) else {
            throw ServerError(
                .invalidSeed,
                message: hasMembership
                    ? "name a role: this member has none in project \(project.storageText) (one of \(schema.roles.joined(separator: ", ")))"
                    : "name a role: one of \(schema.roles.joined(separator: ", "))")
        }
        var plan = Plan(change: .unchanged(role))
        plan.addsMembership = !hasMembership
        // A member who reached nothing (no live member record with a role) never could read what was
        // deleted meanwhile: given a role again, their membership begins again (attack 104, F1).
        plan.restartsMembership = hasMembership && before == nil
        let fields = schema.membershipFields(scope: project, user: user, role: role, name: name ?? userName, email: email, now: now)
        // What an existing record takes: the role, and the name and email given, where the entity declares
        // them. One not given stays as it is: a role change rewrote the member's name to the one the
        // operator typed, and a member added back without an e-mail address lost theirs (attack 85, F5).
        var given = fields.filter { field, _ in
            field == schema.roleField || (field == "name" && name != nil) || (field == "email" && email != nil)
        }
        // Their record wherever a push moved it: to another user, it is taken back (with their name) at its
        // next version. Written anew at version 1 over the stored one, a device holding the moved copy at a
        // newer version kept it for good (attack 90, F1).
        if var own = memberRecords.first(where: { $0.id == id }) {
            if own.fields[schema.userField] != .uuid(user) {
                given[schema.userField] = .uuid(user)
                given["name"] = fields["name"]
            }
            let changed = given.filter { field, value in own.fields[field] != value }
            if own.deletion != nil || !changed.isEmpty {
                counters.changeSequence += 1
                own.edit(own.deletion != nil ? given : changed, at: now, sequence: counters.changeSequence)
                try own.checkAsOperatorsWrite()
                plan.records.append(own)
            }
        } else {
            let stamp = HybridTimestamp(physicalMilliseconds: now.milliseconds, counter: 0, node: NodeID(0))
            plan.records.append(try rules.seededRecord(
                schema.membership, id: id, projectID: project, owner: user,
                fields: fields, stamp: stamp, now: now, counters: &counters))
        }
        for var other in naming where other.id != id && other.deletion == nil {
            counters.changeSequence += 1
            other.tombstone(at: now, sequence: counters.changeSequence)
            plan.records.append(other)
        }
        if !hasMembership {
            // Back, when their own record is there: only a membership ever wrote it.
            plan.change = memberRecords.contains { $0.id == id } ? .readded(role) : .added(role)
        } else if before != role {
            plan.change = .roleChanged(from: before, to: role)
        } else if plan.records.contains(where: { $0.id == id }) {
            plan.change = .detailsChanged(role)
        }
        return plan
    }
}
