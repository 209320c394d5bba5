import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostServer
import OutpostSync
import OutpostWire
import Testing

/// A token may expire: from then on its next request is answered 401 on every instance, as a revoked
/// one is; a token without an expiry keeps working.
@Suite(.fieldService) struct TokenExpiryTests {
    @Test("A token expiring mid-session gets 401 on its next request, on every instance", arguments: Backend.available)
    func anExpiredTokenIsRefusedEverywhere(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        // PostgreSQL: a second instance on the same database; SQLite serves one instance per file.
        let second = backend == .postgres ? try await TestServer.start(backend, sharing: first) : nil
        let instances = [first] + (second.map { [$0] } ?? [])
        let token = try await first.server.issueToken(for: TestServer.alice, expiresAt: Date().addingTimeInterval(3600))
        for instance in instances {
            #expect(try await instance.send("POST", "/pull", token: token, body: Self.pull).status == 200)
        }
        // The hour passes (the clock is the database's row, moved back, not a test that waits an hour).
        try await first.execute("UPDATE tokens SET expires_at = 1 WHERE expires_at IS NOT NULL")
        for instance in instances {
            let answer = try await instance.send("POST", "/pull", token: token, body: Self.pull)
            #expect(answer.status == 401, "\(String(decoding: answer.body, as: UTF8.self))")
        }
        // A token without an expiry is untouched.
        #expect(try await first.send("POST", "/pull", token: TestServer.aliceToken, body: Self.pull).status == 200)
        // One issued already expired never works.
        let stale = try await first.server.issueToken(for: TestServer.alice, expiresAt: Date().addingTimeInterval(-1))
        #expect(try await first.send("POST", "/pull", token: stale, body: Self.pull).status == 401)
        if let second { await second.stop() }
        await first.stop()
    }

    @Test("Noting a token's use never holds its request: a pull is answered while another process holds the database's write lock, and the use is noted once it lets go")
    func aTokensUseIsNotedOffTheRequestsPath() async throws {
        let server = try await TestServer.start(.sqlite)
        defer { Task { await server.stop() } }
        // Another process's write transaction (a second connection to the file locks as one would), held
        // until the pull is answered: a pull that waited for it to note the token's use waited the server's
        // whole busy timeout (10 s), then answered.
        let held = HeldWriteLock(path: server.databasePath)
        try await held.waitUntilHeld()
        // Answered while the lock is held. (How fast is not asserted: the old code also answered once its
        // busy wait ran out, after 10 s, and under make test's load this pull has taken 15 s without it.)
        #expect(try await server.send("POST", "/pull", token: TestServer.aliceToken, body: Self.pull).status == 200)
        try await held.release()
        var noted: Date?
        for _ in 0..<300 where noted == nil {
            noted = try await server.server.tokens(of: TestServer.alice).first?.lastUsedAt
            if noted == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(noted != nil, "the use is noted once the lock is free")
    }

    static let pull = try! wireJSON(PullRequest(cursor: nil, limit: 1))
}

/// What the operator reads back: a project's members with their roles, tokens with their last use (never
/// the secret), and the admin log of every admin action, on both backends.
@Suite(.fieldService) struct AdministrationTests {
    @Test("Members with roles, tokens with last use, and an admin log naming who did what", arguments: Backend.available)
    func theOperatorReadsWhatIsTrue(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        let server = first.server
        let members = try await server.members(of: TestServer.projectA)
        #expect(members.contains { $0.userID == TestServer.alice })
        let outsider = UUID()
        #expect(try await server.members(of: UUID()).isEmpty)

        // A role change, a new token used once, a revocation and a removal: each is logged by who did it.
        let change = try await server.addMember(
            .init(userID: outsider, name: "Dana", role: "viewer", projects: [TestServer.projectA]), by: "test operator")
        #expect(change[TestServer.projectA] != nil)
        #expect(try await server.members(of: TestServer.projectA).first { $0.userID == outsider }?.role == "viewer")
        #expect(try await server.members(of: TestServer.projectA).first { $0.userID == outsider }?.details["name"] == "Dana")
        let token = try await server.issueToken(for: outsider, expiresAt: Date().addingTimeInterval(3600), by: "test operator")
        let unused = try await server.tokens(of: outsider)
        #expect(unused.count == 1 && unused[0].lastUsedAt == nil && unused[0].expiresAt != nil)
        #expect(!unused[0].digestPrefix.isEmpty && !token.contains(unused[0].digestPrefix))
        let before = Date().addingTimeInterval(-1)
        #expect(try await first.send("POST", "/pull", token: token, body: TokenExpiryTests.pull).status == 200)
        // The use is noted off the request's path, soon after it.
        var noted: Date?
        for _ in 0..<300 where noted == nil {
            noted = try await server.tokens(of: outsider).first?.lastUsedAt
            if noted == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let used = try #require(noted)
        #expect(used >= before)
        #expect(try await server.revokeToken(token, by: "test operator"))
        #expect(try await server.tokens(of: outsider).isEmpty)
        #expect(try await server.removeMember(outsider, from: TestServer.projectA, by: "test operator"))
        #expect(try await server.members(of: TestServer.projectA).allSatisfy { $0.userID != outsider })

        let log = try await server.adminLog(limit: 10).filter { $0.actor == "test operator" }
        #expect(log.map(\.action) == ["add-member", "issue-token", "revoke-token", "remove-member"])
        #expect(log.allSatisfy { $0.details.contains(outsider.uuidString.lowercased()) || $0.action == "revoke-token" })
        #expect(log.allSatisfy { !$0.details.contains(token) }, "the log never holds a token")
        #expect(zip(log, log.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        await first.stop()
    }

    /// A server set up from a seed file names what it was given in its admin log, as it names what an
    /// admin adds later: an operator reading the log for who may reach what found no trace of the
    /// seeded tokens (attack 78, low).
    @Test("The seed a server starts from is in its admin log: each project, membership and token by its name, never a secret; loaded again, nothing more", arguments: Backend.available)
    func theSeedIsInTheAdminLog(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        defer { Task { await first.stop() } }
        let server = first.server
        let seed = TestServer.seed
        let log = try await server.adminLog(limit: 1000).filter { $0.actor == "seed" }
        #expect(log.filter { $0.action == "create-project" }.count == seed.projects.count, "\(log)")
        #expect(log.filter { $0.action == "add-member" }.count == seed.members.map(\.projects.count).reduce(0, +), "\(log)")
        #expect(log.filter { $0.action == "issue-token" }.count == seed.tokens.count, "\(log)")
        for user in [TestServer.alice, TestServer.bob, TestServer.carol] {
            for token in try await server.tokens(of: user) {
                #expect(log.contains { $0.action == "issue-token" && $0.details.contains("token \(token.digestPrefix)") && $0.details.contains(user.uuidString.lowercased()) })
            }
        }
        #expect(log.allSatisfy { entry in seed.tokens.allSatisfy { !entry.details.contains($0.token) } }, "the log never holds a token")
        #expect(try await !server.load(seed))
        #expect(try await server.adminLog(limit: 1000).filter { $0.actor == "seed" }.count == log.count)
    }

    /// Each admin change is written in one transaction with the admin log entry that names it: written
    /// after it, a server stopped or refused a write in between kept a promotion, a removal or a
    /// revocation that no log held (as the seed did, attack 83). With every log entry refused, each
    /// action is refused and changes nothing; with entries taken again, each changes what it says.
    @Test("Every admin change is written with its log entry or not at all", arguments: Backend.available)
    func everyAdminChangeIsWrittenWithItsLogEntryOrNotAtAll(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        defer { Task { await first.stop() } }
        let server = first.server
        let state = { () async throws -> [[String]] in
            [
                try await first.strings("SELECT project_id || ' ' || user_id FROM memberships ORDER BY 1"),
                try await first.strings("SELECT token_sha256 FROM tokens ORDER BY 1"),
                try await first.strings("SELECT project_id FROM archived_projects ORDER BY 1"),
                try await first.strings("SELECT id || ' ' || CAST(version AS TEXT) FROM records ORDER BY 1"),
                try await first.strings("SELECT CAST(seq AS TEXT) || actor || action || details FROM admin_log ORDER BY seq"),
            ]
        }
        let dave = UUID(uuidString: "da7e0000-0000-4000-8000-000000000004")!
        let newProject = ServerSeed.Project(id: UUID(uuidString: "c0000000-0000-4000-8000-00000000000c")!, name: "Cedar Lane")
        let bobsName = try #require(try await server.tokens(of: TestServer.bob).first?.digestPrefix)
        let actions: [(String, @Sendable () async throws -> Void)] = [
            ("add a member", { _ = try await server.addMember(.init(userID: dave, name: "Dave", role: "crew", projects: [TestServer.projectA]), by: "t") }),
            ("promote a member", { _ = try await server.addMember(.init(userID: TestServer.alice, name: "Alice", role: "owner", projects: [TestServer.projectA]), by: "t") }),
            ("remove a member", { _ = try await server.removeMember(TestServer.carol, from: TestServer.projectB, by: "t") }),
            ("revoke a token", { _ = try await server.revokeToken(TestServer.aliceToken, by: "t") }),
            ("revoke a token by its name", { _ = try await server.revokeToken(named: bobsName, by: "t") }),
            ("revoke a user's tokens", { _ = try await server.revokeTokens(of: TestServer.carol, by: "t") }),
            ("archive a project", { _ = try await server.archiveProject(TestServer.projectB, by: "t") }),
            ("create a project", { _ = try await server.createProject(newProject, by: "t") }),
            ("issue a token", { _ = try await server.issueToken(for: TestServer.bob, by: "t") }),
        ]
        if backend == .postgres {
            try await first.execute(
                "CREATE FUNCTION refuse_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the log takes nothing'; END $$")
            try await first.execute("CREATE TRIGGER refuse_log BEFORE INSERT ON admin_log FOR EACH ROW EXECUTE FUNCTION refuse_log()")
        } else {
            try await first.execute("CREATE TRIGGER refuse_log BEFORE INSERT ON admin_log BEGIN SELECT RAISE(ABORT, 'the log takes nothing'); END")
        }
        for (name, action) in actions {
            let before = try await state()
            await #expect(throws: (any Error).self, "\(name) went on without its entry") { try await action() }
            #expect(try await state() == before, "\(name) changed something with no entry in the log")
        }
        try await first.execute(backend == .postgres ? "DROP TRIGGER refuse_log ON admin_log" : "DROP TRIGGER refuse_log")
        for (name, action) in actions {
            let entries = try await server.adminLog(limit: 1000).count
            let changed = try await state()
            try await action()
            #expect(try await server.adminLog(limit: 1000).count == entries + 1, "\(name) wrote one entry")
            #expect(try await state().dropLast() != changed.dropLast(), "\(name) changed something")
        }
    }

    /// `outpost admin log --last 0` printed one entry, where the admin API refuses a limit of 0 (attack
    /// 83, info): fewer than one entry is refused by the library both call.
    @Test("The admin log refuses fewer than one entry, as its route does")
    func theAdminLogRefusesFewerThanOneEntry() async throws {
        let first = try await TestServer.start(.sqlite)
        defer { Task { await first.stop() } }
        for limit in [0, -1, Int.min] {
            let error = try await #require(throws: ServerError.self) { try await first.server.adminLog(limit: limit) }
            #expect(error.wireCode == .invalidRequest && error.httpStatus == 400, "\(error)")
        }
        #expect(try await first.server.adminLog(limit: 1).count == 1)
    }

    /// A backup copies every token digest and record a server holds, and a restore brings back what was
    /// removed or revoked since: it was in no log (attack 83, info). Each copy written is logged with
    /// its place and who made it, a path's unprintable characters escaped so it stays one line.
    @Test("A backup is in the admin log, by whom and where, on one line")
    func aBackupIsInTheAdminLog() async throws {
        let first = try await TestServer.start(.sqlite)
        defer { Task { await first.stop() } }
        let path = first.directory.appendingPathComponent("copy\n2 forged\u{2028}entry.sqlite").path
        try await first.server.backUp(to: path, by: "test operator")
        let entry = try #require(try await first.server.adminLog(limit: 1).last)
        #expect(entry.action == "back-up" && entry.actor == "test operator", "\(entry)")
        #expect(entry.details.contains(first.directory.path) && entry.details.contains("\\u{2028}"), "\(entry.details)")
        #expect(!entry.details.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x2028 }, "\(entry.details)")
        // A copy refused (its file exists) writes nothing to the log.
        await #expect(throws: ServerError.self) { try await first.server.backUp(to: path, by: "test operator") }
        #expect(try await first.server.adminLog(limit: 1).last?.sequence == entry.sequence)
    }

    /// The operator revokes one token by the name `tokens` lists (the first 12 hex digits of its
    /// digest), without its secret: it had to be typed on the command line (kept in the shell's history
    /// and seen by anyone's `ps`), which the operator seldom holds anyway (a crew member's lost phone).
    @Test("One token revoked by its listed name, the user's other token still works; an unknown or malformed name changes nothing", arguments: Backend.available)
    func oneTokenRevokedByItsName(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        defer { Task { await first.stop() } }
        let server = first.server
        let before = Set(try await server.tokens(of: TestServer.alice).map(\.digestPrefix))
        let phone = try await server.issueToken(for: TestServer.alice, by: "test operator")
        let name = try #require(try await server.tokens(of: TestServer.alice).map(\.digestPrefix).first { !before.contains($0) })
        let laptop = try await server.issueToken(for: TestServer.alice, by: "test operator")
        let listed = try await server.tokens(of: TestServer.alice)

        #expect(try await !server.revokeToken(named: "000000000000", by: "test operator"), "no token has that name")
        for malformed in ["", "00000", "zzzzzzzzzzzz", name + "0", phone, "\(name)' OR '1'='1"] {
            await #expect(throws: ServerError.self, "\(malformed)") { try await server.revokeToken(named: malformed, by: "test operator") }
        }
        #expect(try await server.tokens(of: TestServer.alice).count == listed.count, "nothing was revoked")

        #expect(try await server.revokeToken(named: name, by: "test operator"))
        #expect(try await first.send("POST", "/pull", token: phone, body: TokenExpiryTests.pull).status == 401)
        #expect(try await first.send("POST", "/pull", token: laptop, body: TokenExpiryTests.pull).status == 200)
        #expect(try await !server.revokeToken(named: name, by: "test operator"), "already gone")
        let log = try await server.adminLog(limit: 10).filter { $0.action == "revoke-token" }
        #expect(log.map(\.details).suffix(2) == ["token \(name): revoked", "token \(name): unknown"], "\(log)")
    }

    @Test("An archived project takes no more changes, on every instance, and says so only to its members; they still pull it; brought back, it takes them again", arguments: Backend.available)
    func anArchivedProjectTakesNoChanges(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        let second = backend == .postgres ? try await TestServer.start(backend, sharing: first) : nil
        defer { Task { await second?.stop(); await first.stop() } }
        let server = first.server
        let alice = first.transport(token: TestServer.aliceToken)
        let issue = UUID()
        let photo = Data("photo".utf8)
        let attachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue, bytes: photo))
        let created = try await alice.push(PushRequest(mutations: [
            Sample.create(.issue, id: issue, fields: Sample.issueFields(project: TestServer.projectA)), attachment,
        ]))
        guard case .applied(let version, _) = created.results.first?.outcome else { Issue.record("\(created)"); return }
        func upload() async throws -> (status: Int, code: ServerErrorCode?) {
            let answer = try await first.send(
                "PUT", "/media/\(attachment.recordID.uuidString.lowercased())/upload", token: TestServer.aliceToken, body: photo,
                headers: ["Content-Range": "bytes 0-4/5", "Outpost-Media-SHA256": sha256Hex(photo)])
            return (answer.status, try? JSONDecoder().decode(ErrorBody.self, from: answer.body).code)
        }
        #expect(try await server.archiveProject(TestServer.projectA, by: "test operator"))
        #expect(try await !server.archiveProject(TestServer.projectA, by: "test operator"), "already archived: nothing changed")
        await #expect(throws: ServerError.self) { try await server.archiveProject(UUID(), by: "test operator") }

        // A member's create and update, on either instance: refused with why; the project's records still pull.
        for instance in [first] + (second.map { [$0] } ?? []) {
            let member = instance.transport(token: TestServer.aliceToken)
            let refused = try await member.push(PushRequest(mutations: [
                Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA)),
                Sample.update(.issue, id: issue, baseVersion: version, fields: ["title": .text("Cracked lintel")]),
            ]))
            for result in refused.results {
                guard case .rejected(let reason) = result.outcome else { Issue.record("\(result.outcome)"); continue }
                #expect(reason.code == .projectArchived, "\(reason)")
            }
            let pulled = try await member.pull(PullRequest(cursor: nil, limit: 1000)).changes
            #expect(pulled.contains { $0.recordID == issue && $0.fields["title"] == .text("Cracked sill") })
        }
        // Nor a file: an upload that completed moved the project's checkpoint, and its file reached every
        // member (attack 85, F3).
        let refusedUpload = try await upload()
        #expect(refusedUpload.status == 409 && refusedUpload.code == .projectArchived, "\(refusedUpload)")
        // Someone who is not a member learns nothing of it: refused as before, never `project_archived`.
        let bob = first.transport(token: TestServer.bobToken)
        let stranger = try await bob.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        guard case .rejected(let reason)? = stranger.results.first?.outcome else { Issue.record("\(stranger)"); return }
        #expect(reason.code != .projectArchived)
        // Another project goes on.
        let elsewhere = try await bob.push(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))]))
        guard case .applied = elsewhere.results.first?.outcome else { Issue.record("\(elsewhere)"); return }
        // Brought back, the update goes through.
        #expect(try await server.archiveProject(TestServer.projectA, archived: false, by: "test operator"))
        let again = try await alice.push(PushRequest(mutations: [
            Sample.update(.issue, id: issue, baseVersion: version, fields: ["title": .text("Cracked lintel")]),
        ]))
        guard case .applied = again.results.first?.outcome else { Issue.record("\(again)"); return }
        #expect(try await upload().status == 200)
        let log = try await server.adminLog(limit: 10).filter { $0.actor == "test operator" }.map(\.action)
        #expect(log == ["archive-project", "archive-project", "unarchive-project"])
    }

    @Test("A project the operator creates is pulled by the members added to it; creating it again changes nothing and says so", arguments: Backend.available)
    func theOperatorCreatesAProject(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        defer { Task { await first.stop() } }
        let server = first.server
        let project = UUID()
        #expect(try await server.createProject(.init(id: project, name: "Birch Lane", address: "4 Birch Lane"), by: "test operator"))
        #expect(try await server.members(of: project).isEmpty)
        // Its id again (under another name): nothing changes, and the answer says so.
        #expect(try await !server.createProject(.init(id: project, name: "Renamed"), by: "test operator"))
        // A member added to it pulls it; a member of another project does not see it.
        let user = UUID()
        _ = try await server.addMember(.init(userID: user, name: "Eve", role: "crew", projects: [project]), by: "test operator")
        let token = try await server.issueToken(for: user, by: "test operator")
        let pulled = try await first.transport(token: token).pull(PullRequest(cursor: nil, limit: 100)).changes
        let projectRecord = try #require(pulled.first { $0.entity == .project })
        #expect(projectRecord.recordID == project && projectRecord.fields["name"] == .text("Birch Lane"))
        #expect(projectRecord.fields["address"] == .text("4 Birch Lane"))
        let others = try await first.transport(token: TestServer.bobToken).pull(PullRequest(cursor: nil, limit: 1000)).changes
        #expect(!others.contains { $0.recordID == project })
        // An invalid project is refused with the reason, and nothing is created.
        let unnamed = UUID()
        await #expect(throws: ServerError.self) { try await server.createProject(.init(id: unnamed, name: ""), by: "test operator") }
        #expect(try await server.createProject(.init(id: unnamed, name: "Named now"), by: "test operator"))
        let log = try await server.adminLog(limit: 10).filter { $0.action == "create-project" }
        let entries = log.map(\.details).filter { $0.contains(project.uuidString.lowercased()) }
        #expect(entries.count == 2)
        // The refused creation's name is named as asked, never as the project's (attack 84).
        #expect(entries.last?.hasSuffix("exists, unchanged (asked as Renamed)") == true && entries.last?.contains("(Renamed):") == false, "\(entries)")
    }

    /// A member's name and e-mail address are theirs until the operator gives others: a role changed, or a
    /// member added back, with neither given keeps both. `outpost admin add-member` required `--name`, so a
    /// role change rewrote the member's name to whatever the operator typed, and adding a member back
    /// without `--email` blanked theirs (attack 85, F5). A user the server has never seen needs a name.
    @Test("A role change or an add-back keeps the name and e-mail address not given; a new user needs a name", arguments: Backend.available)
    func detailsNotGivenAreKept(_ backend: Backend) async throws {
        let first = try await TestServer.start(backend)
        defer { Task { await first.stop() } }
        let server = first.server
        let (dana, project) = (UUID(), TestServer.projectA)
        func details() async throws -> (role: String?, name: String?, email: String?) {
            let member = try await server.members(of: project).first { $0.userID == dana }
            return (member?.role, member?.details["name"], member?.details["email"])
        }
        #expect(try await server.addMember(dana, to: project, role: "crew", name: "Dana Reyes", email: "dana@example.com", by: "t") == .added("crew"))
        #expect(try await server.addMember(dana, to: project, role: "foreman", by: "t") == .roleChanged(from: "crew", to: "foreman"))
        #expect(try await details() == ("foreman", "Dana Reyes", "dana@example.com"))
        #expect(try await server.removeMember(dana, from: project, by: "t"))
        #expect(try await server.addMember(dana, to: project, by: "t") == .readded("crew"))
        #expect(try await details() == ("crew", "Dana Reyes", "dana@example.com"))
        // Given, they change; the e-mail address alone, the name stays.
        #expect(try await server.addMember(dana, to: project, email: "reyes@example.com", by: "t") == .detailsChanged("crew"))
        #expect(try await details() == ("crew", "Dana Reyes", "reyes@example.com"))
        // In another project, a user the server knows keeps the name it has for them.
        #expect(try await server.addMember(dana, to: TestServer.projectB, role: "viewer", by: "t") == .added("viewer"))
        #expect(try await server.members(of: TestServer.projectB).first { $0.userID == dana }?.details["name"] == "Dana Reyes")
        // A user new to the server, with no name: refused, and nothing is written.
        let stranger = UUID()
        let logged = try await server.adminLog(limit: 1000).count
        await #expect(throws: ServerError.self) { try await server.addMember(stranger, to: project, role: "crew", by: "t") }
        #expect(try await server.members(of: project).allSatisfy { $0.userID != stranger })
        #expect(try await server.adminLog(limit: 1000).count == logged)
    }
}

/// A token's requests are limited per minute when the operator sets a limit: past it, 429
/// `rate_limited` with `Retry-After`; another token is not held back by it.
@Suite(.fieldService) struct RateLimitTests {
    @Test("Past its per-minute limit a token gets 429 with Retry-After; another token goes on")
    func aTokenPastItsLimitIsToldWhenToComeBack() async throws {
        let server = try await TestServer.start(.sqlite) { $0.requestsPerMinutePerToken = 3 }
        let pull = try wireJSON(PullRequest(cursor: nil, limit: 1))
        let started = ContinuousClock.now
        for _ in 0..<3 {
            #expect(try await server.send("POST", "/pull", token: TestServer.aliceToken, body: pull).status == 200)
        }
        let limited = try await server.send("POST", "/pull", token: TestServer.aliceToken, body: pull)
        // The limit of 3 refills one request every 20 s: on a host so loaded that four pulls took that
        // long, the fourth is rightly let through, and the limit cannot be judged.
        guard ContinuousClock.now - started < .seconds(19) else {
            await server.stop()
            return
        }
        #expect(limited.status == 429, "\(String(decoding: limited.body, as: UTF8.self))")
        #expect(try JSONDecoder().decode(ErrorBody.self, from: limited.body).code == .rateLimited)
        let retryAfter = try #require(limited.headers["retry-after"].flatMap(Int.init))
        #expect((1...20).contains(retryAfter), "a minute's limit of 3 refills one request in 20 s: \(retryAfter)")
        #expect(try await server.send("POST", "/pull", token: TestServer.carolToken, body: pull).status == 200)
        // A token no one issued is not counted, and stays 401.
        #expect(try await server.send("POST", "/pull", token: "guess", body: pull).status == 401)
        await server.stop()
    }
}
