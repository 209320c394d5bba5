import Crypto
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostServer
import OutpostStore
import OutpostSync
import OutpostTesting
import OutpostWire
import Synchronization

/// Scenario `access`: authorization as a property. Two server instances on one database (odd seeds
/// SQLite, even seeds PostgreSQL), six users, two seeded projects. Each step the office does one thing
/// at random (adds, removes or re-adds a member, changes a role with `add-member`, edits, deletes or
/// pushes a member record, restarts an instance with its seed, issues or revokes a token, or a user
/// creates a project), and then every user, with a token of theirs that may have been revoked, through
/// either instance, pulls from the start and from their cursor and tries one thing: an issue, a
/// discount, a daily log as themselves or as another, editing or deleting a log (theirs or another's), a member record naming
/// themselves owner, a bundle, an upload or an upload's status, in a project of theirs, another's or one
/// that does not exist. Every answer is checked against `RoleTable`: a caller reaching more than the
/// office gave counts under `escalated`, less under `diverged`.
enum AccessScenario {
    static let scenario = Scenario(
        name: "access",
        summary: "random admin actions (add, remove, re-add, role changes, member-record edits and deletes, seed restarts, "
            + "token issue and revoke, archiving) between every caller's pulls, pushes, bundles and uploads on two instances "
            + "(odd seeds SQLite, even PostgreSQL), each answer checked against the role table",
        quickSeeds: 2, fullSeeds: 20
    ) { seed, quick in await run(seed: seed, quick: quick) }

    static func run(seed: UInt64, quick: Bool) async -> SeedOutcome {
        var outcome = SeedOutcome()
        let onPostgres = seed % 2 == 0
        var database: (name: String, url: String)?
        var base = ""
        do {
            let folder = try ScratchFolder("access")
            defer { folder.remove() }
            if onPostgres {
                base = try ReliabilityPostgres.baseURL()
                database = try await ReliabilityPostgres.createDatabase(on: base, for: "access")
            }
            var random = SeededGenerator(seed: seed ^ 0xACCE_55)
            let configuration = ServerConfiguration(
                databasePath: folder.path("server.sqlite"), port: 0, mediaDirectory: folder.path("media"),
                assignsServerIDs: random.chance(0.5), logLevel: "critical", postgresURL: database?.url, durableCommits: false)
            let run = try await AccessRun(configuration: configuration, random: random, folder: folder)
            do {
                try await run.play(steps: quick ? 30 : 150)
            } catch {
                run.outcome.crashed(error, during: "step \(run.step) (\(run.action))")
            }
            await run.stop()
            outcome = run.outcome
            AccessTally.shared.add(run.figures)
        } catch {
            outcome.crashed(error, during: "setup")
        }
        if let database { await ReliabilityPostgres.dropDatabase(database.name, on: base) }
        return outcome
    }
}

/// What the access scenario did, over every seed: steps, the office's actions by kind, and the answers
/// checked by kind of request and what the role table expected.
final class AccessTally: Sendable {
    static let shared = AccessTally()
    private let totals = Mutex(Figures())

    struct Figures: Sendable, Codable {
        var steps = 0
        /// The office's actions, by kind ("add", "re-add", "role change", "remove", …).
        var actions: [String: Int] = [:]
        /// Answers checked, by request ("pull", "issue", "bundle", …) and then expected answer.
        var answers: [String: [String: Int]] = [:]

        mutating func add(_ other: Figures) {
            steps += other.steps
            actions.merge(other.actions, uniquingKeysWith: +)
            answers.merge(other.answers) { $0.merging($1, uniquingKeysWith: +) }
        }
    }

    func add(_ figures: Figures) { totals.withLock { $0.add(figures) } }

    var figures: Figures { totals.withLock { $0 } }
}

/// One of the two instances: a `SyncServer` in this process, answering HTTP on 127.0.0.1.
private struct AccessInstance {
    let server: SyncServer
    let port: Int
    let task: Task<Void, any Error>

    /// Starts an instance and loads the seed; `loaded` says whether the seed changed anything.
    static func start(_ configuration: ServerConfiguration, seed: ServerSeed) async throws -> (AccessInstance, loaded: Bool) {
        let server = try SyncServer(configuration: configuration)
        let loaded = try await server.load(seed)
        let (port, task) = try await LoopbackServer.serve(server)
        return (AccessInstance(server: server, port: port, task: task), loaded)
    }

    func stop() async {
        task.cancel()
        _ = await task.result
    }
}

/// One seed's run: the instances, the role table and what the harness learned of the records.
private final class AccessRun {
    static let users: [UUID] = (1...6).map { UUID(uuidString: String(format: "acce5500-0000-4000-8000-%012d", $0))! }
    static let seededProjects = [
        UUID(uuidString: "acce5500-0000-4000-8000-0000000000a1")!, UUID(uuidString: "acce5500-0000-4000-8000-0000000000a2")!,
    ]
    /// A project id no one ever creates: every request about it is answered as about nothing.
    static let nowhere = UUID(uuidString: "acce5500-0000-4000-8000-0000000000ff")!

    let configuration: ServerConfiguration
    let seed: ServerSeed
    let folder: ScratchFolder
    var random: SeededGenerator
    var instances: [AccessInstance] = []
    var table: RoleTable
    /// Every token issued, whose it is, and whether it still stands.
    var tokens: [(token: String, user: UUID, live: Bool)]
    var outcome = SeedOutcome()
    var figures = AccessTally.Figures()
    var step = 0
    var action = "setup"

    /// What the harness knows of records: each one's project, member records' names in the table,
    /// the last version seen, daily logs with their author, attachments waiting for their file.
    var projectOf: [UUID: UUID] = [:]
    var projectsByServerID: [String: UUID] = [:]
    var names: [UUID: RoleTable.RecordName] = [:]
    var versions: [UUID: Int64] = [:]
    /// `deletedAt`: when the harness deleted it, on the role table's clock (`RoleTable.advance()`); a
    /// deleted log is edited once more at most (its answer says nothing of whether the edit brought it back).
    var logs: [(id: UUID, project: UUID, author: UUID, live: Bool, version: Int64, deletedAt: Int?)] = []
    var attachments: [(id: UUID, project: UUID, creator: UUID, bytes: Data, uploaded: Bool)] = []
    /// Changes the server took, with the token that sent them: sent again under their keys, they are
    /// answered as what the caller may see now (`resendATakenChange`). The latest few hundred.
    var taken: [(mutation: PushMutation, token: String)] = []
    var cursors: [String: String] = [:]
    var transports: [String: HTTPTransport] = [:]

    init(configuration: ServerConfiguration, random: SeededGenerator, folder: ScratchFolder) async throws {
        self.configuration = configuration
        self.folder = folder
        self.random = random
        // The first user owns both projects (the office); the others get random roles in either, the last none.
        var members: [ServerSeed.Member] = [.init(userID: Self.users[0], name: "Owner", role: "owner", projects: Self.seededProjects)]
        for (index, user) in Self.users.enumerated().dropFirst().dropLast() {
            var given = false
            for project in Self.seededProjects where self.random.chance(0.7) {
                let role = RoleTable.order[self.random.below(RoleTable.order.count)]
                members.append(.init(userID: user, name: "User \(index)", role: role.rawValue, projects: [project]))
                given = true
            }
            if !given { members.append(.init(userID: user, name: "User \(index)", projects: [])) }
        }
        members.append(.init(userID: Self.users[5], name: "Outsider", projects: []))
        let tokens = Self.users.enumerated().map { (token: "access-\($0.offset)-token", user: $0.element, live: true) }
        seed = ServerSeed(
            projects: Self.seededProjects.enumerated().map { .init(id: $0.element, name: "Yard \($0.offset)") },
            members: members, tokens: tokens.map { .init(userID: $0.user, token: $0.token) })
        table = RoleTable(seed: seed)
        self.tokens = tokens
        for project in Self.seededProjects { projectOf[project] = project }
        for index in 0..<2 {
            let (instance, loaded) = try await AccessInstance.start(configuration, seed: seed)
            instances.append(instance)
            if loaded != (index == 0) { mismatch(.diverged, "instance \(index) loaded the seed: \(loaded)") }
        }
    }

    func stop() async {
        for instance in instances { await instance.stop() }
    }

    func play(steps: Int) async throws {
        action = "the first look"
        try await checkEveryone()
        for index in 0..<steps {
            step = index + 1
            try await act()
            // A membership the office began again is told from a later delete by their milliseconds.
            try? await Task.sleep(for: .milliseconds(2))
            figures.actions[kind(of: action), default: 0] += 1
            if random.chance(0.15) { try await writeAndDeleteALog() }
            try await deleteAgainWhereSomeoneIsBlind()
            try await resendATakenChange()
            try await checkEveryone()
        }
        figures.steps += steps
        outcome.mutations = figures.answers.values.flatMap(\.values).reduce(0, +)
    }

    private func kind(of action: String) -> String {
        String(action.prefix { $0 != ":" })
    }

    // MARK: - The office

    private func act() async throws {
        let instance = instances[random.below(2)].server
        switch random.below(100) {
        case 0..<20:
            let user = random.pick(Self.users), project = random.pick(table.projects)
            let role = random.pick(RoleTable.order)
            let expected = table.add(user, to: project, as: role)
            action = "add-member: \(name(user)) to \(name(project)) as \(role.rawValue)"
            let change = try await instance.addMember(.init(userID: user, name: name(user), role: role.rawValue, projects: [project]))
            // The role table models roles, not names: an office push may have renamed the member record,
            // which the answer then reports (`detailsChanged`) where the table expects `unchanged`.
            var answered = change[project]
            if case .detailsChanged(let kept)? = answered { answered = .unchanged(kept) }
            if answered != expected { mismatch(.diverged, "add-member answered \(String(describing: change[project])), not \(expected)") }
            action = "\(kindName(of: expected)): \(name(user)) in \(name(project)) as \(role.rawValue)"
        case 20..<32:
            let user = random.pick(Self.users), project = random.pick(table.projects)
            let expected = table.remove(user, from: project)
            action = "remove-member: \(name(user)) from \(name(project))"
            let removed = try await instance.removeMember(user, from: project)
            if removed != expected { mismatch(.diverged, "remove-member answered \(removed), not \(expected)") }
        case 32..<44: try await officePush(.update)
        case 44..<52: try await officePush(.delete)
        case 52..<60: try await officePush(.create)
        case 60..<67:
            let index = random.below(2)
            action = "restart: instance \(index) with its seed"
            await instances[index].stop()
            let (restarted, loaded) = try await AccessInstance.start(configuration, seed: seed)
            instances[index] = restarted
            if loaded { mismatch(.escalated, "the seed loaded again on a restart, undoing the office's changes") }
        case 67..<77:
            let user = random.pick(Self.users)
            action = "issue-token: for \(name(user))"
            tokens.append((try await instance.issueToken(for: user), user, true))
        case 77..<87:
            let index = random.below(tokens.count)
            action = "revoke-token: \(name(tokens[index].user))'s token \(index)"
            let revoked = try await instance.revokeToken(tokens[index].token)
            if revoked != tokens[index].live { mismatch(.diverged, "revoke answered \(revoked)") }
            tokens[index].live = false
        case 93..<97:
            let project = random.pick(table.projects), archive = random.chance(0.6)
            action = "\(archive ? "archive-project" : "unarchive-project"): \(name(project))"
            let expected = table.setArchived(project, archive)
            let changed = try await instance.archiveProject(project, archived: archive)
            if changed != expected { mismatch(.diverged, "\(archive ? "archive" : "unarchive") answered \(changed), not \(expected)") }
        case 87..<93:
            let user = random.pick(Self.users)
            action = "revoke-tokens: every token of \(name(user))"
            let count = try await instance.revokeTokens(of: user)
            let expected = tokens.filter { $0.user == user && $0.live }.count
            if count != expected { mismatch(.diverged, "revoked \(count) tokens, not \(expected)") }
            for index in tokens.indices where tokens[index].user == user { tokens[index].live = false }
        default:
            let user = random.pick(Self.users)
            guard table.projects.count < 5, let token = liveToken(of: user) else {
                action = "nothing: (no project made)"
                return
            }
            let project = random.uuid()
            action = "create-project: \(name(user)) creates \(name(project))"
            let answer = try await push([create(.project, id: project, fields: [
                "opportunityID": .null, "name": .text("Site \(table.projects.count)"), "number": .null, "address": .text(""),
                "status": .text("active"), "startDay": .null,
            ])], token: token)
            if answer.first == .allowed {
                table.createProject(project, by: user)
                projectOf[project] = project
            } else {
                mismatch(.diverged, "a new project was answered \(answer)")
            }
        }
    }

    private func kindName(of change: MembershipChange) -> String {
        switch change {
        case .added: "add"
        case .readded: "re-add"
        case .roleChanged: "role-change"
        case .detailsChanged: "add-details"
        case .unchanged: "add-unchanged"
        }
    }

    /// A member of the office (owner or project manager, with a live token) edits, deletes or pushes a
    /// member record of a project; nothing when the project has no such member now.
    private func officePush(_ operation: PushMutation.Operation) async throws {
        let project = random.pick(table.projects)
        let office = Self.users.filter { user in
            table.role(of: user, in: project).map { RoleTable.deletesOthers(as: $0) } ?? false && liveToken(of: user) != nil
        }
        guard !office.isEmpty else {
            action = "nothing: (no office in \(name(project)))"
            return
        }
        let caller = random.pick(office)
        let token = liveToken(of: caller)!
        let callerRole = table.role(of: caller, in: project)!
        func expected(_ roles: Member.Role...) -> AccessAnswer {
            table.inArchive(roles.allSatisfy { RoleTable.gives($0, as: callerRole) } ? .allowed : .forbidden, in: project)
        }
        // What the caller holds now, so the push is on the current versions.
        try await learn(from: pullAll(token: token, instance: random.below(2)).records)
        switch operation {
        case .create:
            let user = random.pick(Self.users), role = random.pick(RoleTable.order), id = random.uuid()
            action = "push-member-create: \(name(caller)) names \(name(user)) \(role.rawValue) in \(name(project))"
            let answer = try await push([create(.member, id: id, fields: [
                "projectID": .uuid(project), "userID": .uuid(user), "name": .text(name(user)), "email": .text(""),
                "role": .text(role.rawValue),
            ])], token: token)
            // One live record per member and project: a second is refused, whatever its role.
            let want = table.hasLiveRecord(naming: user, in: project) ? .forbidden : expected(role)
            guard answer.first == want else {
                return mismatch(.diverged, "the office's member record was answered \(answer)")
            }
            guard answer.first == .allowed else { return }
            table.create(id, naming: user, as: role, in: project)
            names[id] = .pushed(id: id)
            projectOf[id] = project
        case .update, .delete:
            let live = names.filter { projectOf[$0.key] == project && table.record($0.value, in: project)?.live == true }
            guard let picked = live.sorted(by: { $0.value.drawOrder < $1.value.drawOrder }).randomElement(using: &random),
                let version = versions[picked.key]
            else {
                action = "nothing: (no member record known in \(name(project)))"
                return
            }
            let (id, recordName) = (picked.key, picked.value)
            let named = table.record(recordName, in: project).map { name($0.user) } ?? "?"
            let held = table.record(recordName, in: project)!.role
            if operation == .delete {
                action = "push-member-delete: \(name(caller)) deletes \(named)'s record in \(name(project))"
                let answer = try await push([PushMutation(
                    idempotencyKey: UUID(), entity: .member, operation: .delete, recordID: id, baseVersion: version,
                    deletion: clock())], token: token)
                guard answer.first == expected(held) else {
                    return mismatch(.diverged, "the office's delete was answered \(answer)")
                }
                guard answer.first == .allowed else { return }
                table.delete(recordName, in: project)
            } else {
                let role = random.pick(RoleTable.order)
                action = "push-member-role: \(name(caller)) makes \(named)'s record \(role.rawValue) in \(name(project))"
                let stamp = clock()
                let answer = try await push([PushMutation(
                    idempotencyKey: UUID(), entity: .member, operation: .update, recordID: id, baseVersion: version,
                    fields: ["role": .text(role.rawValue)], clocks: ["role": stamp])], token: token)
                guard answer.first == expected(held, role) else {
                    return mismatch(.diverged, "the office's role change was answered \(answer)")
                }
                guard answer.first == .allowed else { return }
                table.setRole(of: recordName, in: project, to: role)
            }
        }
    }

    // MARK: - Every caller

    private func checkEveryone() async throws {
        for user in Self.users {
            // Mostly the newest token; now and then an older one, which may have been revoked.
            let theirs = tokens.filter { $0.user == user }
            let token = random.chance(0.2) ? random.pick(theirs) : theirs.last!
            let instance = random.below(2)
            try await checkPulls(user: user, token: token, instance: instance)
            try await probe(user: user, token: token, instance: instance)
        }
    }

    /// A pull from the start holds exactly the projects the caller may reach, and nothing of any other;
    /// a pull from the caller's cursor brings nothing of a project they may not reach.
    private func checkPulls(user: UUID, token: (token: String, user: UUID, live: Bool), instance: Int) async throws {
        let reach = table.projects(of: user)
        let whole = try await pullAll(token: token.token, instance: instance)
        expect("pull", token.live ? .allowed : .unauthorized, whole.answer, who: user)
        guard whole.answer == .allowed else { return }
        try learn(from: whole.records)
        var seen: Set<UUID> = []
        for record in whole.records {
            if record.entity == .project, record.deletion == nil { seen.insert(record.recordID) }
            try await checkPlace(of: record, reach: reach, user: user, pull: "from the start")
            // A member record the caller holds says what the office last gave.
            if record.entity == .member, record.deletion == nil, let name = names[record.recordID],
                let project = projectOf[record.recordID], let held = table.record(name, in: project),
                !held.live || record.fields["role"] != .text(held.role.rawValue)
            {
                mismatch(.diverged, "\(self.name(user)) pulled member record \(record.recordID) as \(record.fields["role"] ?? .null), the table has \(held)")
            }
        }
        for project in reach.subtracting(seen) { mismatch(.diverged, "\(name(user)) cannot pull \(name(project)), where they are \(table.role(of: user, in: project)!.rawValue)") }
        for project in seen.subtracting(reach) { mismatch(.escalated, "\(name(user)) pulled \(name(project)), where they have no role") }

        let key = token.token
        let onward = try await pullAll(token: key, instance: 1 - instance, from: cursors[key] ?? whole.cursor)
        guard onward.answer == .allowed else {
            return mismatch(.diverged, "\(name(user))'s pull from their cursor was answered \(onward.answer)")
        }
        cursors[key] = onward.cursor
        try learn(from: onward.records)
        for record in onward.records { try await checkPlace(of: record, reach: reach, user: user, pull: "from their cursor") }
    }

    private func checkPlace(of record: ServerRecord, reach: Set<UUID>, user: UUID, pull: String) async throws {
        // A record no one pulled while it was live (a tombstone sent without its values) is looked up in
        // the server's database.
        if projectOf[record.recordID] == nil { projectOf[record.recordID] = try await projectInDatabase(of: record.recordID) }
        guard let project = projectOf[record.recordID] else {
            return mismatch(.diverged, "\(name(user)) pulled \(record.entity.rawValue) \(record.recordID) \(pull), which the harness cannot place: \(record.fields)")
        }
        if !reach.contains(project) {
            mismatch(.escalated, "\(name(user)) pulled \(record.entity.rawValue) \(record.recordID) of \(name(project)) \(pull), where they have no role")
        }
    }

    /// The project the server's database files a record under.
    private func projectInDatabase(of id: UUID) async throws -> UUID? {
        let text = id.uuidString.lowercased()
        let found: String?
        if let url = configuration.postgresURL {
            found = try await ReliabilityPostgres.rows(
                "SELECT coalesce(project_id, ''), entity FROM records WHERE id = \(text)", of: (String, String).self, on: url
            ).first?.0
        } else {
            let queue = try DatabaseQueue(path: configuration.databasePath)
            defer { try? queue.close() }
            found = try await queue.read { db in
                try String.fetchOne(db, sql: "SELECT project_id FROM records WHERE id = ?", arguments: [text])
            }
        }
        return found.flatMap(UUID.init(uuidString:))
    }

    /// Records what pulls tell: each record's project, member records' names and versions.
    private func learn(from records: [ServerRecord]) throws {
        for record in records where record.entity == .project {
            projectOf[record.recordID] = record.recordID
            if let serverID = record.serverID { projectsByServerID[serverID] = record.recordID }
        }
        for record in records {
            versions[record.recordID] = record.version
            // With server ids, a reference names the parent's server id once the client can map it.
            switch record.fields["projectID"] {
            case .uuid(let project)?: projectOf[record.recordID] = project
            case .text(let serverID)?: if let project = projectsByServerID[serverID] { projectOf[record.recordID] = project }
            default: break
            }
            if record.entity == .member, names[record.recordID] == nil, case .uuid(let user)? = record.fields["userID"] {
                names[record.recordID] = .given(user: user)
            }
        }
    }

    /// The live tokens of members whose membership of `log`'s project began after its first delete.
    private func blindTokens(to log: Int) -> [(token: String, user: UUID, live: Bool)] {
        guard let deletedAt = logs[log].deletedAt else { return [] }
        return tokens.filter {
            $0.live && table.role(of: $0.user, in: logs[log].project) != nil
                && table.deletedBeforeMembership(at: deletedAt, of: $0.user, in: logs[log].project)
        }
    }

    /// A log a member of the office writes as themselves and deletes at once: one for members who join
    /// later to be blind to. The callers' own draws left about one deleted log a seed.
    private func writeAndDeleteALog() async throws {
        func office(_ user: UUID, _ project: UUID) -> Bool {
            table.role(of: user, in: project).map { RoleTable.deletesOthers(as: $0) } ?? false
        }
        let writers = tokens.filter { token in token.live && table.projects.contains { office(token.user, $0) } }
        guard let token = writers.randomElement(using: &random) else { return }
        let projects = table.projects.filter { office(token.user, $0) && table.inArchive(.allowed, in: $0) == .allowed }
        guard let project = projects.randomElement(using: &random),
            let author = names.filter({ projectOf[$0.key] == project && table.isOwn($0.value, of: token.user, in: project) })
                .sorted(by: { $0.value.drawOrder < $1.value.drawOrder }).first?.key
        else { return }
        let instance = random.below(2), id = random.uuid()
        let created = try await push([create(.dailyLog, id: id, fields: [
            "projectID": .uuid(project), "authorID": .uuid(author), "day": .text("2026-11-28"), "notes": .text("to be deleted"),
            "weather": .text(""), "crew": .text(""), "hours": .real(8), "crewSize": .integer(3),
        ])], token: token.token, instance: instance)
        expect("log written to be deleted", .allowed, created.first!, who: token.user, in: project)
        guard created.first == .allowed else { return }
        projectOf[id] = project
        let deleted = try await push([PushMutation(
            idempotencyKey: UUID(), entity: .dailyLog, operation: .delete, recordID: id, baseVersion: 1, deletion: clock())],
            token: token.token, instance: instance)
        expect("delete a log written to be deleted", .allowed, deleted.first!, who: token.user, in: project)
        guard deleted.first == .allowed else { return }
        logs.append((id, project, author, false, 2, table.advance()))
        // The server tells the delete from a membership's start by their milliseconds.
        try? await Task.sleep(for: .milliseconds(2))
    }

    /// Where a member is blind to a deleted log (their membership began after its delete), a member who
    /// saw it delete it again, at its version, now and then: the write that left a tombstone deleted and
    /// moved its time on the server, after which the rule let the blind member have the deleted text and
    /// the record back. Every blind member then tries it (`probeHidden`). Left to the callers' own
    /// draws, this came about once in eight full-scale seeds.
    private func deleteAgainWhereSomeoneIsBlind() async throws {
        let watched = logs.indices.filter { !logs[$0].live && !blindTokens(to: $0).isEmpty }
        guard let index = watched.randomElement(using: &random), random.chance(0.5) else { return }
        let log = logs[index]
        // A member who saw it and may delete it: its author or the office.
        let deleters = tokens.filter { token in
            guard token.live, let role = table.role(of: token.user, in: log.project),
                !table.deletedBeforeMembership(at: log.deletedAt!, of: token.user, in: log.project),
                RoleTable.writes(.dailyLog, as: role)
            else { return false }
            let own = names[log.author].map { table.isOwn($0, of: token.user, in: log.project) } ?? false
            return own || RoleTable.deletesOthers(as: role)
        }
        guard let deleter = deleters.randomElement(using: &random) else { return }
        let instance = random.below(2)
        let answer = try await push([PushMutation(
            idempotencyKey: UUID(), entity: .dailyLog, operation: .delete, recordID: log.id, baseVersion: log.version,
            deletion: clock())], token: deleter.token, instance: instance)
        expect("delete again a deleted log", table.inArchive(.allowed, in: log.project), answer.first!, who: deleter.user, in: log.project)
        guard answer.first == .allowed else { return }
        logs[index].version += 1
        try await probeHidden(index, written: log.version, instance: instance)
    }

    /// A change the server took, sent again under its key by the token that sent it (a device whose answer
    /// was lost): its `duplicate` answer is the caller's only while they may still see the record. To a
    /// member who left its project, holds no role there now, or whose membership began again after the
    /// record's delete, it is as nothing there: answered
    /// `duplicate`, its checkpoint followed the record, and polling the key told a removed member of each
    /// edit and delete the office made to it since (attack 110, F1).
    private func resendATakenChange() async throws {
        guard random.chance(0.5), let sent = taken.randomElement(using: &random),
            let project = projectOf[sent.mutation.recordID], let token = tokens.first(where: { $0.token == sent.token })
        else { return }
        let id = sent.mutation.recordID
        // A member record deleted since: when, the table does not say, so whether it was deleted before
        // the sender's membership began again is not known here.
        if let name = names[id], table.record(name, in: project)?.live != true { return }
        var want: AccessAnswer = !token.live ? .unauthorized : table.role(of: token.user, in: project) == nil ? .hidden : .allowed
        if let log = logs.first(where: { $0.id == id }) {
            // Edited once deleted, a log is left alone: whether the edit brought it back is not known here.
            if !log.live, log.deletedAt == nil { return }
            // A log deleted while the sender was away is as nothing there to them, its key too (attack 111, F4).
            if want == .allowed, let deletedAt = log.deletedAt, table.deletedBeforeMembership(at: deletedAt, of: token.user, in: project) {
                want = .hidden
            }
        }
        let answer = try await push([sent.mutation], token: sent.token, resending: true)
        expect("send a taken change again under its key", want, answer.first!, who: token.user, in: project)
    }

    /// Right after a write that left `logs[index]` deleted (a delete again, which made version
    /// `written + 1`): every member whose membership began after its first delete edits it, on that
    /// version or an older one, and must be answered as for nothing there.
    private func probeHidden(_ index: Int, written: Int64, instance: Int) async throws {
        let log = logs[index]
        for token in blindTokens(to: index) {
            let base = random.chance(0.5) ? log.version : Int64(random.below(Int(written)) + 1)
            let mutation = PushMutation(
                idempotencyKey: UUID(), entity: .dailyLog, operation: .update, recordID: log.id, baseVersion: base,
                fields: ["notes": .text("edited at step \(step)")], clocks: ["notes": clock()])
            let answer = try await push([mutation], token: token.token, instance: instance)
            expect("edit a log deleted before the membership began, deleted again since", .hidden, answer.first!,
                   who: token.user, in: log.project)
        }
    }

    /// One thing the caller tries, checked against the table.
    private func probe(user: UUID, token: (token: String, user: UUID, live: Bool), instance: Int) async throws {
        // A project of theirs, another's, or none at all.
        let project = random.chance(0.1) ? Self.nowhere : random.pick(table.projects)
        let role = table.role(of: user, in: project)
        // By role alone; `table.inArchive` then says what an archived project answers instead.
        func byRole(writing entity: EntityType) -> AccessAnswer {
            guard token.live else { return .unauthorized }
            guard let role else { return .hidden }
            return RoleTable.writes(entity, as: role) ? .allowed : .forbidden
        }
        func expected(writing entity: EntityType) -> AccessAnswer {
            table.inArchive(byRole(writing: entity), in: project)
        }
        switch random.below(10) {
        case 0:
            let id = random.uuid()
            let answer = try await push([create(.issue, id: id, fields: issueFields(in: project))], token: token.token, instance: instance)
            expect("issue", expected(writing: .issue), answer.first!, who: user, in: project)
            if answer.first == .allowed { projectOf[id] = project }
        case 1:
            let id = random.uuid()
            let answer = try await push([create(.discount, id: id, fields: [
                "projectID": .uuid(project), "name": .text("Friends"), "kind": .text("percentage"), "value": .integer(4_000),
            ])], token: token.token, instance: instance)
            expect("discount", expected(writing: .discount), answer.first!, who: user, in: project)
        case 2:
            // A daily log as one of the project's member records: often their own, else another's.
            let known = names.filter { projectOf[$0.key] == project }.sorted { $0.value.drawOrder < $1.value.drawOrder }
            let mine = known.filter { table.isOwn($0.value, of: user, in: project) }
            guard let picked = (random.chance(0.5) && !mine.isEmpty ? mine : known).randomElement(using: &random) else {
                return try await probe(user: user, token: token, instance: instance)
            }
            let (author, authorName) = (picked.key, picked.value)
            // Or a time entry, which a foreman records for members of weaker roles: by the strongest role
            // any live record gives the named record's user, not the role that record names (attack 89).
            let entity: EntityType = random.chance(0.5) ? .dailyLog : .timeEntry
            var want = byRole(writing: entity)
            if want == .allowed, let role, !table.isOwn(authorName, of: user, in: project) {
                if !RoleTable.writesForOthers(entity, as: role) {
                    want = .forbidden
                } else if !RoleTable.deletesOthers(as: role) {
                    let weaker = table.userRole(of: authorName, in: project).map {
                        RoleTable.order.firstIndex(of: $0)! > RoleTable.order.firstIndex(of: role)!
                    } ?? false
                    if !weaker { want = .forbidden }
                }
            }
            want = table.inArchive(want, in: project)
            let id = random.uuid()
            let fields: [String: FieldValue] = entity == .dailyLog
                ? [
                    "projectID": .uuid(project), "authorID": .uuid(author), "day": .text("2026-11-28"), "notes": .text("poured"),
                    "weather": .text(""), "crew": .text(""), "hours": .real(8), "crewSize": .integer(3),
                ]
                : [
                    "projectID": .uuid(project), "memberID": .uuid(author), "kind": .text("clockIn"),
                    "recordedAt": .date(Date()), "clockInID": .null, "latitude": .null, "longitude": .null, "note": .text(""),
                ]
            let answer = try await push([create(entity, id: id, fields: fields)], token: token.token, instance: instance)
            let noun = entity == .dailyLog ? "log" : "time"
            expect(
                table.isOwn(authorName, of: user, in: project) ? "\(noun) as themselves" : "\(noun) as another", want, answer.first!,
                who: user, in: project)
            if answer.first == .allowed, entity == .timeEntry {
                projectOf[id] = project
            } else if answer.first == .allowed {
                projectOf[id] = project
                logs.append((id, project, author, true, 1, nil))
            }
        case 3:
            // Now and then a deleted log, edited or deleted again: hidden from a member whose membership
            // began after the delete (given a role again after having none; attack 104, F1), as from one
            // who joined later. A delete again leaves it deleted since its first delete, which is what the
            // rule judges by: one that moved the tombstone's time handed a member who joined in between
            // its text on an old version, and the record back on its current one.
            var deleted = logs.indices.filter { !logs[$0].live && logs[$0].deletedAt != nil }
            // Mostly one deleted before this caller's membership began, when there is one: the case the
            // rule is for comes rarely of itself.
            let before = deleted.filter {
                table.role(of: user, in: logs[$0].project) != nil
                    && table.deletedBeforeMembership(at: logs[$0].deletedAt!, of: user, in: logs[$0].project)
            }
            if !before.isEmpty, random.chance(0.6) { deleted = before }
            let pickDeleted = !deleted.isEmpty && (deleted == before || random.chance(0.3))
            guard let index = (pickDeleted ? deleted : logs.indices.filter({ logs[$0].live })).randomElement(using: &random) else {
                return try await probe(user: user, token: token, instance: instance)
            }
            let log = logs[index]
            let role = table.role(of: user, in: log.project)
            let blind = log.deletedAt.map { table.deletedBeforeMembership(at: $0, of: user, in: log.project) } ?? false
            let own = names[log.author].map { table.isOwn($0, of: user, in: log.project) } ?? false
            // An edit of a log is writing for its author, as moving or deleting it is: its own, or the
            // office's for anyone. A delete: its author's or the office's.
            let editing = pickDeleted ? random.chance(0.7) : random.chance(0.5)
            let want: AccessAnswer = blind && token.live && role != nil ? .hidden : table.inArchive(
                !token.live ? .unauthorized
                    : role.map {
                        RoleTable.writes(.dailyLog, as: $0)
                            && (own || (editing ? RoleTable.writesForOthers(.dailyLog, as: $0) : RoleTable.deletesOthers(as: $0)))
                            ? .allowed : .forbidden
                    } ?? .hidden,
                in: log.project)
            let mutation: PushMutation
            if editing {
                let stamp = clock()
                mutation = PushMutation(
                    idempotencyKey: UUID(), entity: .dailyLog, operation: .update, recordID: log.id, baseVersion: log.version,
                    fields: ["notes": .text("edited at step \(step)")], clocks: ["notes": stamp])
            } else {
                mutation = PushMutation(
                    idempotencyKey: UUID(), entity: .dailyLog, operation: .delete, recordID: log.id, baseVersion: log.version,
                    deletion: clock())
            }
            let answer = try await push([mutation], token: token.token, instance: instance)
            expect(
                blind ? (editing ? "edit" : "delete again") + " a log deleted before the membership began"
                    : (editing ? "edit " : "delete ") + (pickDeleted ? "deleted " : "") + (own ? "own log" : "another's log"),
                want, answer.first!, who: user, in: log.project)
            if pickDeleted, editing {
                // Applied, the edit may have brought it back, or not: the log is left alone from here.
                logs[index].deletedAt = nil
            } else if answer.first == .allowed {
                // Applied (the harness alone writes, so the version it holds is the server's); a delete
                // again leaves the log deleted since its first delete.
                logs[index].version += 1
                if !editing, pickDeleted { try await probeHidden(index, written: log.version, instance: instance) }
                if !editing, !pickDeleted {
                    logs[index].live = false
                    logs[index].deletedAt = table.advance()
                    // The server tells the delete from a membership's start by their milliseconds.
                    try? await Task.sleep(for: .milliseconds(2))
                }
            }
        case 4:
            let id = random.uuid()
            let answer = try await push([create(.member, id: id, fields: [
                "projectID": .uuid(project), "userID": .uuid(user), "name": .text("Me"), "email": .text(""), "role": .text("owner"),
            ])], token: token.token, instance: instance)
            // The office gives no role stronger than its own, and a member has one record per project: a
            // caller with a role has one already, so a second naming themselves is refused to everyone.
            var want = byRole(writing: .member)
            if want == .allowed, role != nil { want = .forbidden }
            expect("member record naming themselves owner", table.inArchive(want, in: project), answer.first!, who: user, in: project)
            if answer.first == .allowed {
                table.create(id, naming: user, as: .owner, in: project)
                names[id] = .pushed(id: id)
                projectOf[id] = project
            }
        case 5:
            let answer = await bundle(of: project, token: token.token, instance: instance)
            expect("bundle", token.live ? (role == nil ? .hidden : .allowed) : .unauthorized, answer, who: user, in: project)
        case 6:
            let issue = random.uuid(), attachment = random.uuid()
            let bytes = Data("photo \(attachment)".utf8)
            let answer = try await push([
                create(.issue, id: issue, fields: issueFields(in: project)),
                create(.mediaAttachment, id: attachment, fields: [
                    "issueID": .uuid(issue), "dailyLogID": .null, "kind": .text("photo"), "fileName": .text("sill.jpg"),
                    "contentType": .text("image/jpeg"), "byteSize": .integer(Int64(bytes.count)),
                    "sha256": .text(digest(bytes)), "thumbnail": .null, "capturedAt": .date(Date()), "durationSeconds": .null,
                ]),
            ], token: token.token, instance: instance)
            // An attachment whose issue was refused names an issue that is not there.
            let issueAnswer = expected(writing: .issue)
            expect("issue", issueAnswer, answer.first!, who: user, in: project)
            expect("attachment", issueAnswer == .allowed ? expected(writing: .mediaAttachment) : min(issueAnswer, .hidden),
                   answer.last!, who: user, in: project)
            if answer.last == .allowed {
                projectOf[issue] = project
                projectOf[attachment] = project
                attachments.append((attachment, project, user, bytes, false))
            }
        case 7:
            let waiting = attachments.indices.filter { !attachments[$0].uploaded }
            let mine = waiting.filter { attachments[$0].creator == user }
            guard let index = (random.chance(0.7) && !mine.isEmpty ? mine : waiting).randomElement(using: &random) else {
                return try await probe(user: user, token: token, instance: instance)
            }
            let attachment = attachments[index]
            let role = table.role(of: user, in: attachment.project)
            // An archived project takes no files, as it takes no pushes, after the access checks.
            let want = table.inArchive(
                !token.live ? .unauthorized
                    : role.map { attachment.creator == user && RoleTable.writes(.mediaAttachment, as: $0) ? .allowed : .forbidden }
                    ?? .hidden,
                in: attachment.project)
            let answer = await upload(attachment.id, bytes: attachment.bytes, token: token.token, instance: instance)
            expect(attachment.creator == user ? "upload own file" : "upload another's file", want, answer, who: user, in: attachment.project)
            if answer == .allowed { attachments[index].uploaded = true }
        case 8:
            // The project record itself, renamed on a version long gone: the office's (a conflict, the
            // caller may write it), refused to every other role before the version is compared. Not
            // judged by the archive, which a push meets only after its version is compared.
            let rename = PushMutation(
                idempotencyKey: UUID(), entity: .project, operation: .update, recordID: project, baseVersion: 0,
                fields: ["name": .text("renamed at step \(step)")], clocks: ["name": clock()])
            let want: AccessAnswer = !token.live ? .unauthorized : role.map { RoleTable.writes(.project, as: $0) ? .allowed : .forbidden } ?? .hidden
            let answer = try await push([rename], token: token.token, instance: instance)
            expect("rename the project", want, answer.first!, who: user, in: project)
        default:
            guard let attachment = attachments.randomElement(using: &random) else {
                return try await probe(user: user, token: token, instance: instance)
            }
            let role = table.role(of: user, in: attachment.project)
            let answer = await uploadStatus(attachment.id, token: token.token, instance: instance)
            expect("upload status", token.live ? (role == nil ? .hidden : .allowed) : .unauthorized, answer, who: user, in: attachment.project)
        }
    }

    // MARK: - Requests

    private func transport(_ token: String, instance: Int) -> HTTPTransport {
        let port = instances[instance].port
        let key = "\(port) \(token)"
        if let transport = transports[key] { return transport }
        let transport = HTTPTransport(
            configuration: .init(
                baseURL: URL(string: "http://127.0.0.1:\(port)")!, schemaVersion: LocalSchema.latestVersion,
                requestTimeout: .seconds(120)),
            token: token)
        transports[key] = transport
        return transport
    }

    private func answer(to error: any Error) -> AccessAnswer? {
        let refusal = error as? TransportError
        switch refusal?.status {
        case 401: return .unauthorized
        case 403: return .forbidden
        case 404: return .hidden
        case 409 where refusal?.serverCode == .projectArchived: return .archived
        default: return nil
        }
    }

    /// Each mutation's answer; a request refused whole (401) answers every mutation alike.
    /// `resending`: the mutations were taken before, so `duplicate` is their answer where allowed.
    private func push(
        _ mutations: [PushMutation], token: String, instance: Int? = nil, resending: Bool = false
    ) async throws -> [AccessAnswer] {
        do {
            let response = try await transport(token, instance: instance ?? random.below(2)).push(PushRequest(mutations: mutations))
            return try zip(mutations, response.results).map { mutation, result in
                switch result.outcome {
                case .applied:
                    taken.append((mutation, token))
                    if taken.count > 400 { taken.removeFirst(100) }
                    return .allowed
                case .conflict: return .allowed
                case .rejected(let reason) where reason.code == .forbidden: return .forbidden
                case .rejected(let reason) where reason.code == .notFound: return .hidden
                case .rejected(let reason) where reason.code == .projectArchived: return .archived
                case .rejected(let reason): throw ReliabilityError("a push was rejected: \(reason.code): \(reason.message)")
                case .duplicate where resending: return .allowed
                case .duplicate: throw ReliabilityError("a fresh idempotency key was answered duplicate")
                }
            }
        } catch {
            guard let answer = answer(to: error) else { throw error }
            return Array(repeating: answer, count: mutations.count)
        }
    }

    /// Every page from `cursor` (the start when nil): the records, the cursor after them, and whether the
    /// token was taken.
    private func pullAll(token: String, instance: Int, from cursor: String? = nil) async throws
        -> (answer: AccessAnswer, records: [ServerRecord], cursor: String?)
    {
        var records: [ServerRecord] = []
        var cursor = cursor
        do {
            for _ in 0..<1_000 {
                let page = try await transport(token, instance: instance).pull(PullRequest(cursor: cursor, limit: 40))
                records += page.changes
                cursor = page.nextCursor
                if !page.hasMore { return (.allowed, records, cursor) }
            }
            throw ReliabilityError("a pull did not end after 1,000 pages")
        } catch let error as TransportError {
            guard let answer = answer(to: error) else { throw error }
            return (answer, [], cursor)
        }
    }

    private func bundle(of project: UUID, token: String, instance: Int) async -> AccessAnswer {
        let file = URL(fileURLWithPath: folder.path("bundle-\(UUID()).json"))
        defer { try? FileManager.default.removeItem(at: file) }
        do {
            _ = try await transport(token, instance: instance).downloadBundle(project: project, format: .json, to: file)
            return .allowed
        } catch {
            return answer(to: error) ?? failed("a bundle of \(name(project))", error)
        }
    }

    private func upload(_ attachment: UUID, bytes: Data, token: String, instance: Int) async -> AccessAnswer {
        do {
            let status = try await transport(token, instance: instance).uploadMedia(MediaChunk(
                attachmentID: attachment, offset: 0, totalBytes: Int64(bytes.count), sha256: digest(bytes), data: bytes))
            return status.complete ? .allowed : failed("an upload", ReliabilityError("the upload of one chunk did not complete"))
        } catch {
            return answer(to: error) ?? failed("an upload", error)
        }
    }

    private func uploadStatus(_ attachment: UUID, token: String, instance: Int) async -> AccessAnswer {
        do {
            _ = try await transport(token, instance: instance).mediaUploadStatus(for: attachment)
            return .allowed
        } catch {
            return answer(to: error) ?? failed("an upload's status", error)
        }
    }

    /// A request that failed for a reason other than access: the seed's crash, checked as nothing.
    private func failed(_ request: String, _ error: any Error) -> AccessAnswer {
        outcome.crashed(error, during: "step \(step) (\(action)): \(request)")
        return .unauthorized
    }

    // MARK: - Checking

    private func expect(_ request: String, _ expected: AccessAnswer, _ answer: AccessAnswer, who user: UUID, in project: UUID? = nil) {
        figures.answers[request, default: [:]][expected.rawValue, default: 0] += 1
        guard answer != expected else { return }
        let place = project.map { " in \(name($0)) (\(table.role(of: user, in: $0)?.rawValue ?? "no role"))" } ?? ""
        mismatch(answer > expected ? .escalated : .diverged, "\(name(user)) \(request)\(place): expected \(expected.rawValue), got \(answer.rawValue)")
    }

    private enum Figure { case escalated, diverged }

    private func mismatch(_ figure: Figure, _ problem: String) {
        switch figure {
        case .escalated: outcome.escalated += 1
        case .diverged: outcome.diverged += 1
        }
        outcome.problems.append("step \(step) after \(action): \(problem)")
    }

    // MARK: - Helpers

    private func liveToken(of user: UUID) -> String? {
        tokens.last { $0.user == user && $0.live }?.token
    }

    private func name(_ id: UUID) -> String {
        if let index = Self.users.firstIndex(of: id) { return index == 0 ? "owner" : "user \(index)" }
        if id == Self.nowhere { return "no project" }
        if let index = table.projects.firstIndex(of: id) { return "project \(index)" }
        return id.uuidString.lowercased()
    }

    private func clock() -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: Int64(Date().timeIntervalSince1970 * 1000), counter: 0, node: NodeID(0xACCE))
    }

    private func create(_ entity: EntityType, id: UUID, fields: [String: FieldValue]) -> PushMutation {
        let stamp = clock()
        return PushMutation(
            idempotencyKey: UUID(), entity: entity, operation: .create, recordID: id, baseVersion: 0, fields: fields,
            clocks: fields.mapValues { _ in stamp }, createdAt: Date())
    }

    private func issueFields(in project: UUID) -> [String: FieldValue] {
        [
            "projectID": .uuid(project), "title": .text("Cracked sill"), "details": .text(""), "status": .text("open"),
            "priority": .text("high"), "assigneeID": .null, "latitude": .null, "longitude": .null, "assetID": .null,
            "modelElementID": .null,
        ]
    }

    private func digest(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}
