import Crypto
import Foundation
import OutpostSchema

/// What each member role may write, checked per mutation at push, as each entity's declaration says
/// (`EntityDescription.access`; the field-service schema's, `EntityCatalog`, gives the product's rule:
/// money (discounts, finance options, fees) and membership are the office's; the crew records the field).
///
/// | role | may write |
/// |---|---|
/// | owner, projectManager | every entity (member records of roles no stronger than their own) |
/// | estimator | every entity but members |
/// | foreman, crew | every entity but discounts, finance options, fees and members |
/// | viewer | nothing |
///
/// A member's role in a project is the `role` of that project's live member record naming the user:
/// one per member (a push that would make a second is refused), or the most privileged of those a
/// server holds from before that rule. **Access fails closed**: a member no live member
/// record names with a role this server knows has no role, and no access to the project at all, never a
/// default one (a missing role once counted as the owner's). The creator of a project made on a device
/// is its owner by the member record the server writes with the project.
///
/// **Authorship**: a record's author field (a comment's and a daily log's `authorID`, a time entry's
/// `memberID`) names the member record of whoever wrote it. A caller writes records as themselves (their
/// own member record), except the office (owner, project manager), who writes for anyone, and a foreman,
/// who records his crew's time. Only its author or the office deletes an authored record, and only those
/// who may write for others change whose it is.
enum Roles {
    /// The field naming a record's author (a member record), for the entities that have one.
    static func authorField(of entity: EntityType) -> String? {
        entity.description.access.authorField
    }

    /// Whether `role` may write records of `entity` naming another member than the caller as author.
    static func writesForOthers(_ entity: EntityType, as role: String) -> Bool {
        entity.description.access.writesForOthers.contains(role)
    }

    /// Whether `role` may delete a record of `entity` someone else wrote.
    static func deletesOthers(_ entity: EntityType, as role: String) -> Bool {
        entity.description.access.deletesOthers.contains(role)
    }

    /// The caller's standing in each project they belong to, from their memberships (with when each
    /// began, epoch milliseconds), each project's live member records and its members (the users the
    /// office made members): the projects where a role is established, that role, and the caller's own
    /// member records there. A membership without one is left out: no role, no access.
    static func access(
        of user: UUID, memberships: [UUID: Int64], memberRecords: [UUID: [StoredRecord]], projectMembers: [UUID: Set<UUID>]
    ) -> ProjectAccess {
        var access = ProjectAccess()
        access.membershipCount = memberships.count
        let schema = ServedSchema.current
        for (project, joined) in memberships {
            var roles: [String] = []
            var own: Set<UUID> = []
            // A record's rank is its user's, the strongest role any live record gives them here, not the
            // one it names: a weaker second record of the owner, or a crew record moved to a project
            // manager, let a foreman write time in their name (attack 89, F1). A record naming someone
            // who is no member gives them no role, and has no rank: a foreman wrote time for one (attack 90, F2).
            let live = (memberRecords[project] ?? []).filter { $0.deletion == nil }
            let members = projectMembers[project] ?? []
            var strongestOfUser: [UUID: Int] = [:]
            for member in live {
                guard case .uuid(let named) = member.fields[schema.userField] ?? .null, members.contains(named),
                    let rank = declaredRole(in: member.fields).flatMap(schema.rank(of:))
                else { continue }
                strongestOfUser[named] = min(strongestOfUser[named] ?? .max, rank)
            }
            var ranks: [UUID: Int] = [:]
            var recordsOfUser: [UUID: Set<UUID>] = [:]
            for member in live {
                guard case .uuid(let named) = member.fields[schema.userField] ?? .null else { continue }
                recordsOfUser[named, default: []].insert(member.id)
                guard let rank = strongestOfUser[named] else { continue }
                ranks[member.id] = rank
                guard let role = role(in: member.fields, of: user) else { continue }
                roles.append(role)
                own.insert(member.id)
            }
            guard let strongest = strongest(roles) else { continue }
            access.roles[project] = strongest
            access.ownMemberRecords[project] = own
            access.memberRanks[project] = ranks
            access.memberRecordsOfUser[project] = recordsOfUser
            access.joinedAt[project] = joined
        }
        return access
    }

    /// Whether `role` may create, change or delete records of `entity`: only a role its declaration
    /// names (none names a viewer).
    static func mayWrite(_ entity: EntityType, as role: String) -> Bool {
        entity.description.access.writers.contains(role)
    }

    /// The member record of `user` in `project`, at an id derived from both: the seed, the operator's
    /// commands and the server's record of a project's creator all write this one.
    ///
    /// With this server's `salt` (`server_settings`, made with the database): derived from project and
    /// user alone, anyone who knew both could ask whether the user is a member, a create naming that
    /// id being refused where a free one applies. A server seeded before the salt keeps the unsalted
    /// ids it has (empty `salt`).
    static func memberRecordID(project: UUID, user: UUID, salt: String) -> UUID {
        let name = (salt.isEmpty ? "" : salt + "/") + project.storageText + "/" + user.storageText
        var bytes = Array(SHA256.hash(data: Data(name.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x50  // version 5-style (name-based)
        bytes[8] = (bytes[8] & 0x3f) | 0x80  // RFC 4122 variant
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// The strongest of `roles` (the schema lists them strongest first), or nil when there is none.
    static func strongest(_ roles: some Sequence<String>) -> String? {
        let schema = ServedSchema.current
        return roles.min { (schema.rank(of: $0) ?? .max) < (schema.rank(of: $1) ?? .max) }
    }

    /// The role a member record's fields name for `user`, if the record names that user with a role the
    /// schema declares (any other names none: access fails closed).
    static func role(in fields: [String: FieldValue], of user: UUID) -> String? {
        guard case .uuid(user) = fields[ServedSchema.current.userField] ?? .null else { return nil }
        return declaredRole(in: fields)
    }

    /// The role a member record's fields name, whoever it is for, if the schema declares it.
    private static func declaredRole(in fields: [String: FieldValue]) -> String? {
        let schema = ServedSchema.current
        guard case .text(let name) = fields[schema.roleField] ?? .null, schema.rank(of: name) != nil else { return nil }
        return name
    }
}

/// What a caller may do in the projects they belong to (`Roles.access`).
struct ProjectAccess: Sendable, Hashable {
    /// The caller's role in each project where one is established: the projects they may reach.
    var roles: [UUID: String] = [:]
    /// The projects the office's memberships name the caller in, with a role or not: what a member who
    /// creates projects is bounded by (`PushRules.maximumProjectsPerMember`). Counted by roles, a member
    /// who deleted their own member record after each project made 101,501 of them, and their pushes
    /// and pulls, and others' pushes beside them, took 0.6 to 1.3 s each (attack 120, N2).
    var membershipCount = 0
    /// The caller's own live member records in each of those projects: whom they write as.
    var ownMemberRecords: [UUID: Set<UUID>] = [:]
    /// The rank of each live member record in each of those projects (0 the strongest): its user's
    /// strongest role there, whichever role the record itself names. Whom a role that writes for others
    /// without being the office (a foreman) may write for.
    var memberRanks: [UUID: [UUID: Int]] = [:]
    /// The live member records naming each user in each of those projects, whoever the user is: one each
    /// (`PushRules.checkOneRecordPerUser`), save those written before the rule.
    var memberRecordsOfUser: [UUID: [UUID: Set<UUID>]] = [:]
    /// When each membership began (epoch milliseconds; 0 for one older than the record of it): a
    /// record deleted before it is one the member never could read.
    var joinedAt: [UUID: Int64] = [:]

    /// The projects the caller may reach.
    var projects: Set<UUID> { Set(roles.keys) }

    /// Whether `caller` (whose access this is) may see a record stored with `projectText` and
    /// `ownerText` (as `records` holds them): a record belongs to its project's members; an opportunity
    /// no project references yet, to its creator. Text that is not an id gives nothing.
    func canSee(recordOf projectText: String?, ownedBy ownerText: String, caller: Caller) -> Bool {
        guard let projectText else { return UUID(uuidString: ownerText) == caller.userID }
        return UUID(uuidString: projectText).map { roles[$0] != nil } ?? false
    }

    /// `canSee`, and not a record deleted before the caller's membership of its project began: what a
    /// change of the record is answered as for nothing there (`PushRules`), the key of a change of it is too.
    func canSee(
        recordOf projectText: String?, ownedBy ownerText: String, deleted: Bool, updatedAt: Int64, caller: Caller
    ) -> Bool {
        canSee(recordOf: projectText, ownedBy: ownerText, caller: caller)
            && !deletedBeforeJoining(projectText.flatMap(UUID.init(uuidString:)), deleted: deleted, updatedAt: updatedAt)
    }

    /// Whether a record of `project`, `deleted`, was deleted before the caller's membership of it began,
    /// by the server's time: its `updatedAt` (epoch milliseconds), which a tombstone keeps from its
    /// delete. Such a record was never the member's to read (the late-joiner rule).
    func deletedBeforeJoining(_ project: UUID?, deleted: Bool, updatedAt: Int64) -> Bool {
        guard deleted, let project, let joined = joinedAt[project], joined > 0 else { return false }
        return updatedAt < joined
    }
}
