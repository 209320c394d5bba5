import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostServer

/// What the office gave, kept by the `access` scenario apart from the server and written from the
/// rules as the README states them (not from the server's code): who is a member of which project,
/// which member records name them with which role, and which tokens still stand. Every answer the
/// server gives a caller is checked against what this table says the caller may do.
///
/// The rules: a caller's role in a project is the strongest role of the live member records naming
/// them there, and only while they are a member; no membership or no such record is no role, and no
/// role is no access at all (fails closed). Owner and project manager write everything; an estimator
/// all but members and the project; foreman and crew all but money (discounts, finance options, fees),
/// members and the project; a viewer nothing (anyone creates a project, and owns it). An authored
/// record names the writer's own member record, except that the office writes for anyone and a foreman
/// records time for his crew (members of weaker roles), and only they change another member's record;
/// only its author or the office deletes it.
/// A project the office archived takes no write at all, the office's included; reads go on.
/// A membership begins when the member joins, and again when they are given a role after having none:
/// a record deleted before then is one they never could read, answered as one that does not exist.
struct RoleTable {
    /// A member record: whom it names, with which role, and whether it is still live.
    struct MemberRecord: Hashable {
        var user: UUID
        var role: Member.Role
        var live: Bool
    }

    /// How the table names a member record: the one the server writes for a membership (the seed,
    /// `add-member`, a project's creator), one per user and project, or one the office pushed itself.
    enum RecordName: Hashable {
        case given(user: UUID)
        case pushed(id: UUID)

        /// An order two runs of one seed agree on: the server's own member records have ids salted per
        /// server, so drawing among records sorted by id drew differently from run to run, and a seed
        /// that failed once could pass the next time. The user a given record names, or the id the
        /// harness drew for a pushed one, comes from the seed.
        var drawOrder: String {
            switch self {
            case .given(let user): "given/" + user.uuidString
            case .pushed(let id): "pushed/" + id.uuidString
            }
        }
    }

    struct Membership: Hashable {
        var project: UUID
        var user: UUID
    }

    private(set) var projects: [UUID] = []
    private(set) var memberships: Set<Membership> = []
    private(set) var records: [UUID: [RecordName: MemberRecord]] = [:]
    /// Projects the office archived: a write its role and authorship allow is refused `project_archived`.
    private(set) var archived: Set<UUID> = []
    /// The table's clock: a tick for each membership that begins and each delete the harness notes, in
    /// the order the server made them (`advance()`).
    private(set) var tick = 0
    /// When each membership began, on that clock: joined, or given a role again after having none (the
    /// seed's began at 0).
    private var since: [Membership: Int] = [:]

    /// Strongest first.
    static let order: [Member.Role] = [.owner, .projectManager, .estimator, .foreman, .crew, .viewer]

    /// The table a seed starts: each member of each project they are given, by their given record.
    init(seed: ServerSeed) {
        projects = seed.projects.map(\.id)
        for member in seed.members {
            let role = member.role.flatMap(Member.Role.init(rawValue:)) ?? .crew
            for project in member.projects {
                memberships.insert(Membership(project: project, user: member.userID))
                records[project, default: [:]][.given(user: member.userID)] = MemberRecord(user: member.userID, role: role, live: true)
            }
        }
    }

    /// The caller's role in `project`, or nil: then they may reach nothing of it.
    func role(of user: UUID, in project: UUID) -> Member.Role? {
        guard memberships.contains(Membership(project: project, user: user)) else { return nil }
        return Self.strongest(of: user, in: records[project] ?? [:])
    }

    /// The next tick of the table's clock: for a delete the harness made, to compare with `since`.
    mutating func advance() -> Int {
        tick += 1
        return tick
    }

    /// Whether a record of `project` deleted at `deletedAt` (the table's clock) was deleted before `user`'s
    /// membership there began: answered to them as one that does not exist.
    func deletedBeforeMembership(at deletedAt: Int, of user: UUID, in project: UUID) -> Bool {
        deletedAt < since[Membership(project: project, user: user), default: 0]
    }

    /// Does `change`, and begins again the membership of every user of `project` it gave a role who had none.
    private mutating func beginningMemberships<T>(in project: UUID, _ change: (inout RoleTable) -> T) -> T {
        func users(_ table: RoleTable) -> Set<UUID> {
            Set((table.records[project] ?? [:]).values.map(\.user)).union(table.memberships.filter { $0.project == project }.map(\.user))
        }
        let before = Dictionary(uniqueKeysWithValues: users(self).map { ($0, role(of: $0, in: project)) })
        let result = change(&self)
        for user in users(self).sorted(by: { $0.uuidString < $1.uuidString })
        where (before[user] ?? nil) == nil && role(of: user, in: project) != nil {
            since[Membership(project: project, user: user)] = advance()
        }
        return result
    }

    /// The projects `user` may reach.
    func projects(of user: UUID) -> Set<UUID> {
        Set(projects.filter { role(of: user, in: $0) != nil })
    }

    func record(_ name: RecordName, in project: UUID) -> MemberRecord? {
        records[project]?[name]
    }

    /// Every member record of `project`, live or not.
    func recordNames(in project: UUID) -> [RecordName] {
        Array((records[project] ?? [:]).keys)
    }

    /// The role of the user a live member record names: the strongest any live record of `project`
    /// gives them, whichever the record names; nil for a record that is not live, or names someone who
    /// is no member of the project (no role is established for them).
    func userRole(of name: RecordName, in project: UUID) -> Member.Role? {
        guard let record = records[project]?[name], record.live else { return nil }
        return role(of: record.user, in: project)
    }

    /// Whether a live member record of `project` names `user`: a second is refused (one per member).
    func hasLiveRecord(naming user: UUID, in project: UUID) -> Bool {
        (records[project] ?? [:]).values.contains { $0.live && $0.user == user }
    }

    /// Whether `name` is a live member record naming `user` in `project`: one they write as.
    func isOwn(_ name: RecordName, of user: UUID, in project: UUID) -> Bool {
        guard let record = records[project]?[name] else { return false }
        return record.live && record.user == user
    }

    // MARK: - What a role may do

    static func writes(_ entity: EntityType, as role: Member.Role) -> Bool {
        let money: Set<EntityType> = [.discount, .financeOption, .fee]
        switch role {
        case .owner, .projectManager: return true
        case .estimator: return entity != .member && entity != .project
        case .foreman, .crew: return !money.contains(entity) && entity != .member && entity != .project
        case .viewer: return false
        }
    }

    static func writesForOthers(_ entity: EntityType, as role: Member.Role) -> Bool {
        role == .owner || role == .projectManager || (role == .foreman && entity == .timeEntry)
    }

    /// Whether `role` may write a member record that is, or becomes, one of role `given`: the office
    /// gives, changes and takes away no role stronger than its own (attack 88).
    static func gives(_ given: Member.Role, as role: Member.Role) -> Bool {
        writes(.member, as: role) && order.firstIndex(of: given)! >= order.firstIndex(of: role)!
    }

    static func deletesOthers(as role: Member.Role) -> Bool {
        role == .owner || role == .projectManager
    }

    // MARK: - What the office does

    /// `add-member`: the user is a member with exactly `role`: their given record has it (created, or
    /// brought back), and no other live record names them. Returns what the command must say: added
    /// back when their given record is there from an earlier membership.
    mutating func add(_ user: UUID, to project: UUID, as role: Member.Role) -> MembershipChange {
        beginningMemberships(in: project) { $0.adding(user, to: project, as: role) }
    }

    private mutating func adding(_ user: UUID, to project: UUID, as role: Member.Role) -> MembershipChange {
        let membership = Membership(project: project, user: user)
        let naming = (records[project] ?? [:]).filter { $0.value.user == user }
        let before = Self.strongest(of: user, in: naming)
        let change: MembershipChange =
            if !memberships.contains(membership) { naming[.given(user: user)] == nil ? .added(role.rawValue) : .readded(role.rawValue) }
            else if before != role { .roleChanged(from: before?.rawValue, to: role.rawValue) }
            else { .unchanged(role.rawValue) }
        memberships.insert(membership)
        for name in naming.keys where name != .given(user: user) { records[project]?[name]?.live = false }
        records[project, default: [:]][.given(user: user)] = MemberRecord(user: user, role: role, live: true)
        return change
    }

    /// `remove-member`: no membership, and every record naming the user is deleted. Returns whether
    /// they were a member.
    mutating func remove(_ user: UUID, from project: UUID) -> Bool {
        for (name, record) in records[project] ?? [:] where record.user == user { records[project]?[name]?.live = false }
        return memberships.remove(Membership(project: project, user: user)) != nil
    }

    /// The office pushed a new role onto a member record.
    mutating func setRole(of name: RecordName, in project: UUID, to role: Member.Role) {
        beginningMemberships(in: project) { $0.records[project]?[name]?.role = role }
    }

    /// The office deleted a member record.
    mutating func delete(_ name: RecordName, in project: UUID) {
        records[project]?[name]?.live = false
    }

    /// The office pushed a new member record naming `user` (which gives a role only to a member).
    mutating func create(_ id: UUID, naming user: UUID, as role: Member.Role, in project: UUID) {
        beginningMemberships(in: project) {
            $0.records[project, default: [:]][.pushed(id: id)] = MemberRecord(user: user, role: role, live: true)
        }
    }

    /// `archive-project` (`on`) or `archive-project --undo`: whether that changed anything.
    mutating func setArchived(_ project: UUID, _ on: Bool) -> Bool {
        on ? archived.insert(project).inserted : archived.remove(project) != nil
    }

    /// What a write the role and authorship rules answer `answer` gets in `project`: refused as archived
    /// when it would have been done there and the project is archived (only a member learns that).
    func inArchive(_ answer: AccessAnswer, in project: UUID) -> AccessAnswer {
        answer == .allowed && archived.contains(project) ? .archived : answer
    }

    /// A device created a project: its creator is its member and owner.
    mutating func createProject(_ project: UUID, by user: UUID) {
        since[Membership(project: project, user: user)] = advance()
        projects.append(project)
        memberships.insert(Membership(project: project, user: user))
        records[project, default: [:]][.given(user: user)] = MemberRecord(user: user, role: .owner, live: true)
    }

    private static func strongest(of user: UUID, in records: [RecordName: MemberRecord]) -> Member.Role? {
        let roles = Set(records.values.filter { $0.live && $0.user == user }.map(\.role))
        return order.first(where: roles.contains)
    }
}

/// An answer a caller got, or should get, ordered from the least to the most it lets them reach.
enum AccessAnswer: String, Sendable, Hashable, Codable, Comparable, CaseIterable {
    /// 401: the token does not stand.
    case unauthorized
    /// 404 or `not_found`: as if there were nothing there.
    case hidden
    /// 403 or `forbidden`: the caller may see it, but not do this.
    case forbidden
    /// `project_archived`: the caller may write it, but the office archived its project.
    case archived
    /// Done (a push's `applied`, or a `conflict` on a version that moved on: the caller may write it).
    case allowed

    private var rank: Int { Self.allCases.firstIndex(of: self)! }
    static func < (a: AccessAnswer, b: AccessAnswer) -> Bool { a.rank < b.rank }
}
