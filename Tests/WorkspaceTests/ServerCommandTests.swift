import AsyncHTTPClient
import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import OutpostFieldServiceTesting
import Testing

@Suite("outpost serve", .fieldService)
struct ServerCommandTests {
    @Test("serve --db --port 0 --seed --server-ids listens, answers health and authorized pulls, and stops on SIGTERM")
    func serveSeedAndStop() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-serve-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let project = "a0000000-0000-4000-8000-00000000000a"
        let user = "a11ce000-0000-4000-8000-000000000001"
        let seed = """
            {"projects": [{"id": "\(project)", "name": "Maple Street"}],
             "members": [{"userID": "\(user)", "name": "Alice", "projects": ["\(project)"]}],
             "tokens": [{"userID": "\(user)", "token": "alice-demo-token"}]}
            """
        let seedFile = folder.appendingPathComponent("seed.json")
        try Data(seed.utf8).write(to: seedFile)
        let database = folder.appendingPathComponent("server.sqlite").path

        let process = Process()
        process.executableURL = Outpost.executable
        process.arguments = ["serve", "--db", database, "--port", "0", "--seed", seedFile.path, "--server-ids"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        // The first line names the port it picked.
        let line = await ChildProcess.firstLine(of: output)
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }, "printed: \(line)")
        #expect(line.hasPrefix("listening on http://127.0.0.1:"))

        func request(_ method: String, _ path: String, token: String?, body: Data? = nil) async throws -> (Int, Data) {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            request.method = HTTPMethod(rawValue: method)
            request.headers.add(name: "Outpost-Protocol-Version", value: "1")
            request.headers.add(name: "Outpost-Schema-Version", value: "7")
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
            let data = try await response.body.collect(upTo: 64 << 20)
            return (Int(response.status.code), Data(data.readableBytesView))
        }
        // Asked until it answers 200, for a minute: its database check has a 3 s deadline, which a loaded
        // host has passed (a 503 then is the deadline working).
        var (healthStatus, health) = try await request("GET", "/health", token: nil)
        for _ in 0..<30 where healthStatus != 200 {
            try await Task.sleep(for: .seconds(2))
            (healthStatus, health) = try await request("GET", "/health", token: nil)
        }
        #expect(healthStatus == 200)
        let healthJSON = try #require(try JSONSerialization.jsonObject(with: health) as? [String: Any])
        #expect(healthJSON["assignsServerIDs"] as? Bool == true)
        let pullBody = Data(#"{"limit": 10}"#.utf8)
        #expect(try await request("POST", "/pull", token: nil, body: pullBody).0 == 401)
        let (pullStatus, page) = try await request("POST", "/pull", token: "alice-demo-token", body: pullBody)
        #expect(pullStatus == 200)
        let changes = try #require((try JSONSerialization.jsonObject(with: page) as? [String: Any])?["changes"] as? [[String: Any]])
        #expect(changes.map { $0["entity"] as? String }.sorted { ($0 ?? "") < ($1 ?? "") } == ["member", "project"])
        #expect(changes.allSatisfy { $0["serverID"] is String })

        // The operator revokes Alice's token and issues a new one, then takes her out of the project,
        // on the running server's file: each takes effect on the next request.
        let revoked = try await Outpost.run(["admin", "revoke-token", "--db", database, "--token", "alice-demo-token"])
        #expect(revoked.status == 0, "\(revoked.errorOutput)")
        #expect(try await request("POST", "/pull", token: "alice-demo-token", body: pullBody).0 == 401)
        let issued = try await Outpost.run(["admin", "issue-token", "--db", database, "--user", user])
        #expect(issued.status == 0, "\(issued.errorOutput)")
        let fresh = issued.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await request("GET", "/projects/\(project)/bundle", token: fresh).0 == 200)
        // A token that expires works until then; a duration the command cannot read is refused, naming the form.
        let shortLived = try await Outpost.run(["admin", "issue-token", "--db", database, "--user", user, "--expires-in", "8h"])
        #expect(shortLived.status == 0, "\(shortLived.errorOutput)")
        #expect(try await request("POST", "/pull", token: shortLived.output.trimmingCharacters(in: .whitespacesAndNewlines), body: pullBody).0 == 200)
        let unreadable = try await Outpost.run(["admin", "issue-token", "--db", database, "--user", user, "--expires-in", "8 hours"])
        #expect(unreadable.status != 0 && unreadable.errorOutput.contains("such as 8h"), "\(unreadable.errorOutput)")
        // The operator reads back what is true: her membership and role, her tokens with their last use.
        let members = try await Outpost.run(["admin", "members", "--db", database, "--project", project])
        #expect(members.status == 0 && members.output.contains(user) && members.output.contains("crew") && members.output.contains("Alice"), "\(members.output)\(members.errorOutput)")
        // A member record's name is synced text, which any owner's device may write with a line break and
        // a direction override: printed raw, it forged a row of the listing (attack 84, F2). Every table
        // the command prints shows such characters escaped, each row on its one line.
        let forged = "Alice  crew\nc0ffee00-0000-4000-8000-000000000000  owner  Mallory\u{202E}"
        let queue = try DatabaseQueue(path: database)
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE records SET fields = json_set(fields, '$.name.text', ?) WHERE entity = 'member' AND fields LIKE '%Alice%'",
                arguments: [forged])
            #expect(db.changesCount == 1)
        }
        try queue.close()
        let listing = try await Outpost.run(["admin", "members", "--db", database, "--project", project])
        #expect(listing.status == 0 && listing.output.split(separator: "\n").count == 3, "\(listing.output)")
        #expect(listing.output.contains(#"\u{A}c0ffee00"#) && listing.output.contains(#"Mallory\u{202E}"#), "\(listing.output)")
        let tokens = try await Outpost.run(["admin", "tokens", "--db", database, "--user", user])
        let tokenRows = tokens.output.split(separator: "\n").filter { $0.hasPrefix(user) }
        #expect(tokens.status == 0 && tokenRows.count == 2, "\(tokens.output)\(tokens.errorOutput)")
        #expect(tokenRows.allSatisfy { !$0.hasSuffix("—") }, "both were used: \(tokens.output)")
        #expect(!tokens.output.contains(fresh), "a listing never shows a token")
        // The short-lived one revoked by the name the listing gives it, no secret typed: it stops, the
        // other works. Refused: a name and a token at once.
        let shortRow = try #require(tokenRows.first { !$0.contains(" never ") }, "\(tokens.output)")
        let shortName = String(shortRow.split(separator: " ", omittingEmptySubsequences: true)[1])
        let both = try await Outpost.run(["admin", "revoke-token", "--db", database, "--name", shortName, "--token", fresh])
        #expect(both.status != 0 && both.errorOutput.contains("exactly one"), "\(both.errorOutput)")
        let byName = try await Outpost.run(["admin", "revoke-token", "--db", database, "--name", shortName])
        #expect(byName.status == 0 && byName.output.contains("revoked 1 token"), "\(byName.output)\(byName.errorOutput)")
        #expect(try await request("POST", "/pull", token: shortLived.output.trimmingCharacters(in: .whitespacesAndNewlines), body: pullBody).0 == 401)
        #expect(try await request("POST", "/pull", token: fresh, body: pullBody).0 == 200)
        // A project the operator creates, with her as its member: her token downloads its bundle. Created
        // again, it is refused, naming the project, and nothing changes.
        let created = try await Outpost.run(["admin", "create-project", "--db", database, "--name", "Birch Lane", "--address", "4 Birch Lane"])
        let newProject = created.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(created.status == 0 && UUID(uuidString: newProject) != nil, "\(created.output)\(created.errorOutput)")
        #expect(try await request("GET", "/projects/\(newProject)/bundle", token: fresh).0 == 404, "not hers yet")
        let joined = try await Outpost.run(["admin", "add-member", "--db", database, "--project", newProject, "--user", user, "--name", "Alice"])
        #expect(joined.status == 0, "\(joined.errorOutput)")
        #expect(try await request("GET", "/projects/\(newProject)/bundle", token: fresh).0 == 200)
        // Her role changed with no --name: she keeps hers (it was required, and rewrote it; attack 85, F5).
        let promoted = try await Outpost.run(["admin", "add-member", "--db", database, "--project", newProject, "--user", user, "--role", "foreman"])
        #expect(promoted.status == 0 && promoted.output.contains("role changed from crew to foreman"), "\(promoted.output)\(promoted.errorOutput)")
        let listed = try await Outpost.run(["admin", "members", "--db", database, "--project", newProject])
        #expect(listed.output.contains("Alice") && listed.output.contains("foreman"), "\(listed.output)\(listed.errorOutput)")
        let again = try await Outpost.run(["admin", "create-project", "--db", database, "--name", "Other", "--id", newProject])
        #expect(again.status != 0 && again.errorOutput.contains("exists"), "\(again.output)\(again.errorOutput)")
        // Archived, it says so (and again, that nothing changed); brought back, likewise; an unknown one is refused.
        let archived = try await Outpost.run(["admin", "archive-project", "--db", database, "--project", newProject])
        #expect(archived.status == 0 && archived.output.contains("archived"), "\(archived.output)\(archived.errorOutput)")
        let twice = try await Outpost.run(["admin", "archive-project", "--db", database, "--project", newProject])
        #expect(twice.status == 0 && twice.output.contains("nothing changed"), "\(twice.output)\(twice.errorOutput)")
        #expect(try await request("GET", "/projects/\(newProject)/bundle", token: fresh).0 == 200, "its members still download it")
        let back = try await Outpost.run(["admin", "archive-project", "--db", database, "--project", newProject, "--undo"])
        #expect(back.status == 0 && back.output.contains("brought back"), "\(back.output)\(back.errorOutput)")
        let unknown = try await Outpost.run(["admin", "archive-project", "--db", database, "--project", UUID().uuidString])
        #expect(unknown.status != 0 && unknown.errorOutput.contains("no project"), "\(unknown.output)\(unknown.errorOutput)")
        let removed = try await Outpost.run(["admin", "remove-member", "--db", database, "--project", project, "--user", user])
        #expect(removed.status == 0, "\(removed.errorOutput)")
        // Every admin action is in the log, in order, with who ran it, after what the seed set up.
        let log = try await Outpost.run(["admin", "log", "--db", database])
        let lines = log.output.split(separator: "\n")
        let actions = lines.compactMap { line in
            ["revoke-token", "issue-token", "remove-member"].first { line.contains("  \($0)  ") }
        }
        #expect(actions == ["issue-token", "revoke-token", "issue-token", "issue-token", "revoke-token", "remove-member"], "\(log.output)")
        let seeded = lines.filter { $0.contains("  seed  ") }
        #expect(seeded.count == 3 && seeded.contains { $0.contains("  issue-token  ") && $0.contains("user \(user)") }, "\(log.output)")
        #expect(!log.output.contains("alice-demo-token"), "the log never holds a token")
        // Who ran it is the process's account (its uid), not $USER, which anyone sets.
        #expect(lines.filter { !$0.contains("  seed  ") }.allSatisfy { $0.contains("outpost admin (") && $0.contains("uid \(getuid()))") }, "\(log.output)")
        // As a project that does not exist: an answer never tells what the caller may not reach.
        #expect(try await request("GET", "/projects/\(project)/bundle", token: fresh).0 == 404)
        #expect(try await Outpost.run(["admin", "remove-member", "--db", database, "--project", project, "--user", user]).status != 0)

        process.terminate()
        await ChildProcess.waitUntilExit(process)
        #expect(process.terminationStatus == 0)
        // The file holds the token's digest, never the token.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: database))
        bytes += (try? Data(contentsOf: URL(fileURLWithPath: database + "-wal"))) ?? Data()
        #expect(bytes.range(of: Data("Maple Street".utf8)) != nil)
        #expect(bytes.range(of: Data("alice-demo-token".utf8)) == nil)
    }

    @Test("serve --tls-certificate --tls-key speaks HTTPS only (curl trusting the certificate pulls, and scrapes /metrics with --metrics-token-file's token); a device refuses plain HTTP to another machine")
    func tlsRoundTrip() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-tls-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // A throwaway certificate for 127.0.0.1, made by the real openssl.
        let certificate = folder.appendingPathComponent("cert.pem").path, key = folder.appendingPathComponent("key.pem").path
        let made = try await ChildProcess.finish(Self.process("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ]))
        try #require(made.status == 0, "\(String(decoding: made.errors, as: UTF8.self))")
        let project = "a0000000-0000-4000-8000-00000000000a", user = "a11ce000-0000-4000-8000-000000000001"
        let seedFile = folder.appendingPathComponent("seed.json")
        try Data("""
            {"projects": [{"id": "\(project)", "name": "Maple Street"}],
             "members": [{"userID": "\(user)", "name": "Alice", "projects": ["\(project)"]}],
             "tokens": [{"userID": "\(user)", "token": "alice-demo-token"}]}
            """.utf8).write(to: seedFile)
        let scraperFile = folder.appendingPathComponent("scraper-token")
        try Data("scraper-secret-1\n".utf8).write(to: scraperFile)

        let process = Process()
        process.executableURL = Outpost.executable
        process.arguments = [
            "serve", "--db", folder.appendingPathComponent("server.sqlite").path, "--port", "0", "--seed", seedFile.path,
            "--tls-certificate", certificate, "--tls-key", key, "--metrics-token-file", scraperFile.path,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line = await ChildProcess.firstLine(of: output)
        #expect(line.hasPrefix("listening on https://127.0.0.1:"), "printed: \(line)")
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })

        // The real curl, trusting the throwaway certificate: the probe answers over TLS.
        let probe = try await ChildProcess.finish(Self.process("/usr/bin/curl", ["-sS", "--cacert", certificate, "https://127.0.0.1:\(port)/livez"]))
        #expect(probe.status == 0, "\(String(decoding: probe.errors, as: UTF8.self))")
        #expect(String(decoding: probe.output, as: UTF8.self).contains(#""status":"live""#))
        // Without trusting it, and in plain HTTP on the TLS port: no answer.
        #expect(try await ChildProcess.finish(Self.process("/usr/bin/curl", ["-sS", "https://127.0.0.1:\(port)/livez"])).status != 0)
        let plain = try await ChildProcess.finish(Self.process("/usr/bin/curl", ["-sS", "-m", "5", "http://127.0.0.1:\(port)/livez"]))
        #expect(plain.status != 0 || !String(decoding: plain.output, as: UTF8.self).contains("live"))

        // Prometheus reads /metrics with the token of --metrics-token-file (its newline dropped); no token
        // and a member's token are refused.
        for (token, answered) in [("scraper-secret-1", true), ("alice-demo-token", false), (nil, false)] as [(String?, Bool)] {
            let scrape = try await ChildProcess.finish(Self.process("/usr/bin/curl", [
                "-sS", "--cacert", certificate, "https://127.0.0.1:\(port)/metrics",
            ] + (token.map { ["-H", "Authorization: Bearer \($0)"] } ?? [])))
            #expect(String(decoding: scrape.output, as: UTF8.self).contains("# TYPE outpost_requests_total counter") == answered, "\(token ?? "none")")
        }

        // A pull over TLS, as a device sends it: the seeded project comes back. (The device's own URL
        // loading trusts the system's certificate authorities only, so it is not pointed at this one.)
        let pull = try await ChildProcess.finish(Self.process("/usr/bin/curl", [
            "-sS", "--cacert", certificate, "-H", "Outpost-Protocol-Version: 1", "-H", "Outpost-Schema-Version: 14",
            "-H", "Authorization: Bearer alice-demo-token", "-H", "Content-Type: application/json", "--data", #"{"limit": 10}"#,
            "https://127.0.0.1:\(port)/pull",
        ]))
        #expect(pull.status == 0, "\(String(decoding: pull.errors, as: UTF8.self))")
        #expect(String(decoding: pull.output, as: UTF8.self).contains(project), "\(String(decoding: pull.output, as: UTF8.self))")
        let device = folder.appendingPathComponent("device.sqlite").path
        #expect(try await Outpost.run(["migrate", "--db", device]).status == 0)

        // Plain HTTP to a machine other than this one is refused before anything is sent, unless allowed.
        let refused = try await Outpost.run(["sync", "--db", device, "--server", "http://192.0.2.1:9", "--token", "alice-demo-token"])
        #expect(refused.status != 0 && refused.output.contains("plain HTTP to 192.0.2.1 is refused"), "\(refused.output)")
        #expect(refused.output.contains("0 bytes sent"), "\(refused.output)")
    }

    /// A child process of a tool given by path.
    private static func process(_ path: String, _ arguments: [String]) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        return process
    }

    /// A seed and the admin log entries that name it are one transaction. Written after it, a server
    /// killed in between kept working tokens that no entry named, for good: a restart does not load a
    /// seed again (attack 83). Killed at several moments of its first start, the server holds every
    /// seeded token and its entry, or neither.
    @Test("A server killed while it loads its seed holds each seeded token with its admin log entry, or neither")
    func aSeedLoadsWithItsLogEntriesOrNotAtAll() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-seedkill-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let project = "a0000000-0000-4000-8000-00000000000a"
        let users = (0..<1_500).map { String(format: "5eed0000-0000-4000-8000-%012d", $0) }
        let seed = """
            {"projects": [{"id": "\(project)", "name": "Maple Street"}],
             "members": [\(users.map { "{\"userID\": \"\($0)\", \"name\": \"Crew \($0.suffix(4))\", \"projects\": [\"\(project)\"]}" }.joined(separator: ","))],
             "tokens": [\(users.map { "{\"userID\": \"\($0)\", \"token\": \"seeded-token-\($0)\"}" }.joined(separator: ","))]}
            """
        let seedFile = folder.appendingPathComponent("seed.json")
        try Data(seed.utf8).write(to: seedFile)
        // Killed at moments of its start, and the last time once it listens (its seed loaded by then,
        // however slow the host), so one run always has a loaded seed to check.
        let delays: [Double?] = [0.5, 1.0, 1.5, 2.5, nil]
        for (run, delay) in delays.enumerated() {
            let database = folder.appendingPathComponent("server-\(run).sqlite").path
            let process = Process()
            process.executableURL = Outpost.executable
            process.arguments = ["serve", "--db", database, "--port", "0", "--seed", seedFile.path]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            if let delay {
                try await Task.sleep(for: .seconds(delay))
            } else {
                let line = await ChildProcess.firstLine(of: output)
                #expect(line.hasPrefix("listening on"), "printed: \(line)")
            }
            kill(process.processIdentifier, SIGKILL)
            await ChildProcess.waitUntilExit(process)
            let tokens = try await Outpost.run(["admin", "tokens", "--db", database])
            let log = try await Outpost.run(["admin", "log", "--db", database, "--last", "100000"])
            guard tokens.status == 0, log.status == 0 else {
                // Killed before its database was made; not once it listened.
                #expect(delay != nil, "\(tokens.errorOutput)\(log.errorOutput)")
                continue
            }
            let held = tokens.output.split(separator: "\n").filter { $0.contains("5eed0000-") }.count
            let named = log.output.split(separator: "\n").filter { $0.contains("  seed  issue-token  ") && $0.contains("5eed0000-") }.count
            #expect(held == named, "killed after \(delay.map { "\($0) s" } ?? "it listened"): \(held) seeded tokens work, \(named) are in the admin log")
            let moment = delay.map { "\($0) s" } ?? "it listened"
            if delay == nil {
                #expect(held == users.count, "killed after \(moment): \(held) of \(users.count) tokens")
            } else {
                #expect(held == 0 || held == users.count, "killed after \(moment): \(held) of \(users.count) tokens")
            }
        }
    }

    @Test("serve refuses --db with --postgres, and --postgres without a shared --media folder")
    func postgresArguments() async throws {
        let both = try await Outpost.run(["serve", "--db", "x.sqlite", "--postgres", "postgres://u@127.0.0.1/db"])
        #expect(both.status != 0)
        #expect(both.errorOutput.contains("exactly one of --db FILE and --postgres URL"))
        let noMedia = try await Outpost.run(["serve", "--postgres", "postgres://u@127.0.0.1/db"])
        #expect(noMedia.status != 0)
        #expect(noMedia.errorOutput.contains("--media"))
    }

    /// A private key of another certificate was refused as "Error: failedToLoadPrivateKey", naming
    /// neither file (attack 78, finding 6): the error names both, as every other TLS refusal names its file.
    @Test("serve refuses a TLS key that is not its certificate's, naming both files")
    func aMismatchedTLSKeyIsRefusedByName() async throws {
        let folder = try TemporaryFolder()
        let certificate = folder.file("cert.pem"), key = folder.file("key.pem"), otherKey = folder.file("other-key.pem")
        let made = try await ChildProcess.finish(Self.process("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=127.0.0.1",
        ]))
        try #require(made.status == 0, "\(String(decoding: made.errors, as: UTF8.self))")
        let other = try await ChildProcess.finish(Self.process("/usr/bin/openssl", ["genrsa", "-out", otherKey, "2048"]))
        try #require(other.status == 0, "\(String(decoding: other.errors, as: UTF8.self))")
        let run = try await Outpost.run([
            "serve", "--db", folder.file("server.sqlite"), "--port", "0", "--tls-certificate", certificate, "--tls-key", otherKey,
        ])
        #expect(run.status == 1, "\(run.status) \(run.errorOutput)")
        #expect(run.errorOutput.contains(otherKey) && run.errorOutput.contains(certificate), "\(run.errorOutput)")
    }

    /// A wait too long to convert (SQLite's busy timeout is milliseconds in an Int32) stopped the process
    /// with a runtime trap after it had created an empty database file (attack 78, finding 1).
    @Test("serve refuses a lock wait past its bound with a clear message, creating nothing")
    func anOutOfRangeWaitIsRefused() async throws {
        let folder = try TemporaryFolder()
        let db = folder.file("server.sqlite")
        for wait in ["2147484", "9223372036854775807"] {
            let run = try await Outpost.run(["serve", "--db", db, "--port", "0", "--database-lock-wait", wait])
            #expect(run.status == 1, "\(wait): \(run.status) \(run.errorOutput)")
            #expect(run.errorOutput.contains("lock wait"), "\(run.errorOutput)")
            #expect(!FileManager.default.fileExists(atPath: db))
        }
    }

    @Test(
        "serve --postgres --media migrates an empty database, listens, answers pulls, and stops on SIGTERM",
        .enabled(if: ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"] != nil,
                 "OUTPOST_TEST_POSTGRES_URL is not set (make test starts a throwaway PostgreSQL)"))
    func servePostgres() async throws {
        let base = try #require(ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-serve-pg-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let name = "outpost_serve_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await psql(base, "CREATE DATABASE \(name)")
        defer { Task { [self] in try? await psql(base, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") } }
        var components = try #require(URLComponents(string: base))
        components.path = "/" + name
        let seedFile = folder.appendingPathComponent("seed.json")
        try Data("""
            {"projects": [{"id": "a0000000-0000-4000-8000-00000000000a", "name": "Maple Street"}],
             "members": [{"userID": "a11ce000-0000-4000-8000-000000000001", "name": "Alice",
                          "projects": ["a0000000-0000-4000-8000-00000000000a"]}],
             "tokens": [{"userID": "a11ce000-0000-4000-8000-000000000001", "token": "alice-demo-token"}]}
            """.utf8).write(to: seedFile)
        let scraperFile = folder.appendingPathComponent("scraper-token")
        try Data("scraper-secret-1\n".utf8).write(to: scraperFile)

        let process = Process()
        process.executableURL = Outpost.executable
        process.arguments = [
            "serve", "--postgres", components.string!, "--media", folder.appendingPathComponent("media").path,
            "--port", "0", "--seed", seedFile.path, "--log-level", "critical",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line = await ChildProcess.firstLine(of: output)
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }, "printed: \(line)")

        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/pull")
        request.method = .POST
        request.headers.add(name: "Outpost-Protocol-Version", value: "1")
        request.headers.add(name: "Outpost-Schema-Version", value: "7")
        request.headers.add(name: "Authorization", value: "Bearer alice-demo-token")
        request.body = .bytes(ByteBuffer(string: #"{"limit": 10}"#))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
        let page = Data(try await response.body.collect(upTo: 64 << 20).readableBytesView)
        #expect(response.status == .ok)
        let changes = try #require((try JSONSerialization.jsonObject(with: page) as? [String: Any])?["changes"] as? [[String: Any]])
        #expect(changes.compactMap { $0["entity"] as? String }.sorted() == ["member", "project"])

        process.terminate()
        await ChildProcess.waitUntilExit(process)
        #expect(process.terminationStatus == 0)
    }

    /// One statement of the test's own through the `psql` client that comes with the server.
    private func psql(_ url: String, _ sql: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql]
        guard try await ChildProcess.finish(process).status == 0 else { throw CocoaError(.fileWriteUnknown) }
    }
}
