import ArgumentParser
import Foundation
import OutpostFieldService
import OutpostSchema
import OutpostServer

/// `outpost admin`: what an operator does to a server's people, on its SQLite file or PostgreSQL
/// database, while it runs: add and remove members, issue and revoke tokens. Every instance reads
/// memberships and tokens on each request, so a change takes effect on the next one, everywhere.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Create and archive projects, add, remove and list members, issue, revoke and list tokens, read the admin log, back up a SQLite server, on a server's database.",
        subcommands: [
            CreateProject.self, ArchiveProject.self, AddMember.self, RemoveMember.self, Members.self, IssueToken.self, RevokeToken.self, Tokens.self, Log.self, Backup.self,
        ])

    /// Who the admin log says did it: this command, and the account it ran as.
    /// The account is the process's own (its uid, and the name the system gives it), not `$USER`,
    /// which anyone sets: `USER=anyone outpost admin …` once wrote "anyone" into the log.
    static var actor: String {
        let uid = getuid()
        let name = getpwuid(uid).flatMap { $0.pointee.pw_name }.map { String(cString: $0) }
        return "outpost admin (\(name ?? "no name") uid \(uid))"
    }

    /// Which server database to work on.
    struct Target: ParsableArguments {
        @Option(help: "The server's SQLite file.")
        var db: String?

        @Option(help: "The server's PostgreSQL URL (postgres://user@host:port/db), password in PGPASSWORD.")
        var postgres: String?

        func validate() throws {
            guard (db == nil) != (postgres == nil) else { throw ValidationError("give exactly one of --db FILE and --postgres URL") }
        }

        /// The server over that database, nothing listening.
        func server() throws -> SyncServer {
            if let db, !FileManager.default.fileExists(atPath: db) { throw CommandFailure("\(db): no such server database") }
            // The media folder is not touched by these commands; PostgreSQL has none of its own here.
            let media = db.map { $0 + ".media" } ?? FileManager.default.temporaryDirectory.appendingPathComponent("outpost-admin-media").path
            do {
                return try SyncServer(configuration: ServerConfiguration(
                    databasePath: db ?? "", mediaDirectory: media, logLevel: "error", postgresURL: postgres))
            } catch {
                throw CommandFailure("\(error)")
            }
        }
    }

    struct CreateProject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create-project",
            abstract: "Create a project (then add its members with add-member); prints its id.")

        @OptionGroup var target: Target
        @Option(help: "The project's name.") var name: String
        @Option(help: "Its address.") var address: String?
        @Option(help: "Its id (a UUID); a new one when omitted.") var id: String?

        func run() async throws {
            let server = try target.server()
            guard let project = id.map({ UUID(uuidString: $0) }) ?? UUID.timeOrdered() else { throw CommandFailure("--id takes a UUID") }
            let created: Bool
            do {
                created = try await server.createProject(.init(id: project, name: name, address: address), by: AdminCommand.actor)
            } catch {
                throw CommandFailure("\(error)")
            }
            // Never a success printed for a project the server already had: its record is not changed.
            guard created else { throw CommandFailure("project \(project.uuidString.lowercased()) exists; nothing changed") }
            print(project.uuidString.lowercased())
        }
    }

    struct ArchiveProject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "archive-project",
            abstract: "Archive a project: it takes no more changes (its members still pull it); --undo brings it back.")

        @OptionGroup var target: Target
        @Option(help: "The project's id.") var project: String
        @Flag(help: "Bring an archived project back.") var undo = false

        func run() async throws {
            let server = try target.server()
            guard let project = UUID(uuidString: project) else { throw CommandFailure("--project takes a UUID") }
            let changed: Bool
            do {
                changed = try await server.archiveProject(project, archived: !undo, by: AdminCommand.actor)
            } catch {
                throw CommandFailure("\(error)")
            }
            let id = project.uuidString.lowercased()
            print(changed ? "project \(id): \(undo ? "brought back" : "archived")" : "project \(id) already was \(undo ? "not archived" : "archived"); nothing changed")
        }
    }

    struct AddMember: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-member",
            abstract: "Make a user a member of a project with a role, add a removed member back, or change a member's role.")

        @OptionGroup var target: Target
        @Option(help: "The project's id.") var project: String
        @Option(help: "The user's id.") var user: String
        @Option(help: "The user's name. Absent: a member keeps theirs; a user new to the server needs one.") var name: String?
        @Option(help: "owner, projectManager, estimator, foreman, crew or viewer; money and membership are the office's (owner, projectManager; estimator: money). Absent: a member keeps theirs, a new one is crew.")
        var role: String?
        @Option(help: "The user's e-mail address. Absent: a member keeps theirs.") var email: String?

        func run() async throws {
            let server = try target.server()
            guard let project = UUID(uuidString: project), let user = UUID(uuidString: user) else {
                throw CommandFailure("--project and --user take UUIDs")
            }
            let change: MembershipChange
            do {
                change = try await server.addMember(user, to: project, role: role, name: name, email: email, by: AdminCommand.actor)
            } catch {
                throw CommandFailure("\(error)")
            }
            // What happened, as it happened: never a role printed that the server did not take.
            print("\(name ?? "user \(user.uuidString.lowercased())"), project \(project.uuidString.lowercased()): \(change)")
        }
    }

    struct RemoveMember: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove-member",
            abstract: "Take a user out of a project: their next request to it is refused, their member record goes.")

        @OptionGroup var target: Target
        @Option(help: "The project's id.") var project: String
        @Option(help: "The user's id.") var user: String

        func run() async throws {
            let server = try target.server()
            guard let project = UUID(uuidString: project), let user = UUID(uuidString: user) else {
                throw CommandFailure("--project and --user take UUIDs")
            }
            let removed: Bool
            do {
                removed = try await server.removeMember(user, from: project, by: AdminCommand.actor)
            } catch {
                throw CommandFailure("\(error)")
            }
            guard removed else { throw CommandFailure("\(user.uuidString.lowercased()) is not a member of that project") }
            print("removed \(user.uuidString.lowercased()) from project \(project.uuidString.lowercased())")
        }
    }

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "members", abstract: "List a project's members: user, role, and their record's name and e-mail.")

        @OptionGroup var target: Target
        @Option(help: "The project's id.") var project: String

        func run() async throws {
            let server = try target.server()
            guard let project = UUID(uuidString: project) else { throw CommandFailure("--project takes a UUID") }
            let members: [ScopeMember]
            do {
                members = try await server.members(of: project)
            } catch {
                throw CommandFailure("\(error)")
            }
            guard !members.isEmpty else { throw CommandFailure("no members: no such project, or nobody in it") }
            print(TextTable(
                headers: ["user", "role", "name", "email"],
                rows: members.map { [$0.userID.uuidString.lowercased(), $0.role, $0.details["name"] ?? "", $0.details["email"] ?? ""] }
            ).rendered)
        }
    }

    struct Tokens: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "tokens", abstract: "List tokens, a user's or everyone's: when issued, until when, last used (never the secret).")

        @OptionGroup var target: Target
        @Option(help: "Only this user's tokens.") var user: String?

        func run() async throws {
            let server = try target.server()
            var id: UUID?
            if let user {
                guard let parsed = UUID(uuidString: user) else { throw CommandFailure("--user takes a UUID") }
                id = parsed
            }
            let tokens: [IssuedToken]
            do {
                tokens = try await server.tokens(of: id)
            } catch {
                throw CommandFailure("\(error)")
            }
            let time = { (date: Date?) in date.map(Timestamp.string(from:)) ?? "—" }
            print(TextTable(
                headers: ["user", "token", "kind", "issued", "expires", "last used"],
                rows: tokens.map {
                    [
                        $0.userID.uuidString.lowercased(), $0.digestPrefix, $0.isAdmin ? "admin" : "member", time($0.createdAt),
                        $0.expiresAt.map(Timestamp.string(from:)) ?? "never", time($0.lastUsedAt),
                    ]
                }
            ).rendered)
        }
    }

    struct Log: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "log", abstract: "Print the admin log: who added, removed or changed a member, issued or revoked a token, and when.")

        @OptionGroup var target: Target
        @Option(help: "How many of the newest entries.") var last: Int = 100

        func run() async throws {
            let server = try target.server()
            let entries: [AdminLogEntry]
            do {
                entries = try await server.adminLog(limit: last)
            } catch {
                throw CommandFailure("\(error)")
            }
            for entry in entries {
                let text = [entry.actor, entry.action, entry.details].map(OneLineText.escaping)
                print("\(entry.sequence)  \(Timestamp.string(from: entry.at))  \(text.joined(separator: "  "))")
            }
        }
    }

    struct IssueToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-token", abstract: "Print a new bearer token for a user (stored hashed, shown once).")

        @OptionGroup var target: Target
        @Option(help: "The user's id.") var user: String
        @Option(help: "How long the token works, as a number and a unit (45m, 8h, 30d); for ever when absent. Its first request after that gets 401 on every instance.")
        var expiresIn: String?
        @Flag(help: "An admin token: it reaches the server's /admin API and nothing else (a member's token syncs and never administers).")
        var admin = false

        func validate() throws {
            if let expiresIn { _ = try Self.seconds(in: expiresIn) }
        }

        func run() async throws {
            let server = try target.server()
            guard let user = UUID(uuidString: user) else { throw CommandFailure("--user takes a UUID") }
            let expiresAt = try expiresIn.map { Date().addingTimeInterval(try Self.seconds(in: $0)) }
            do {
                print(try await server.issueToken(for: user, expiresAt: expiresAt, admin: admin, by: AdminCommand.actor))
            } catch {
                throw CommandFailure("\(error)")
            }
        }

        /// `45m`, `8h`, `30d`, `90s` as seconds; refused with what it takes otherwise.
        static func seconds(in text: String) throws -> TimeInterval {
            let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
            guard let unit = text.last.flatMap({ units[$0] }), let count = Int(text.dropLast()), count > 0 else {
                throw ValidationError("--expires-in takes a positive number and a unit (s, m, h, d), such as 8h; not '\(text)'")
            }
            let seconds = TimeInterval(count) * unit
            guard seconds <= SyncServer.longestTokenLife else {
                throw ValidationError("--expires-in is at most ten years (3650d); not '\(text)'")
            }
            return seconds
        }
    }

    struct RevokeToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-token", abstract: "Revoke a token, or every token of a user: the next request with one gets 401.")

        @OptionGroup var target: Target
        @Option(help: "The token to revoke (its secret; it stays in the shell's history: prefer --name).") var token: String?
        @Option(help: "The token to revoke by its name, the 12 hex digits 'admin tokens' lists.") var name: String?
        @Option(help: "Revoke every token of this user instead.") var user: String?

        func validate() throws {
            guard [token, name, user].compactMap({ $0 }).count == 1 else {
                throw ValidationError("give exactly one of --token, --name and --user")
            }
        }

        func run() async throws {
            let server = try target.server()
            let revoked: Int
            do {
                if let token {
                    revoked = try await server.revokeToken(token, by: AdminCommand.actor) ? 1 : 0
                } else if let name {
                    revoked = try await server.revokeToken(named: name, by: AdminCommand.actor) ? 1 : 0
                } else if let user, let id = UUID(uuidString: user) {
                    revoked = try await server.revokeTokens(of: id, by: AdminCommand.actor)
                } else {
                    throw CommandFailure("--user takes a UUID")
                }
            } catch let failure as CommandFailure {
                throw failure
            } catch {
                throw CommandFailure("\(error)")
            }
            guard revoked > 0 else { throw CommandFailure("no such token") }
            print("revoked \(revoked) token\(revoked == 1 ? "" : "s")")
        }
    }

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Copy a SQLite server's database to a new file while it runs (PostgreSQL: pg_dump).",
            discussion: """
                The copy is one consistent snapshot; the server keeps serving. Copy the media folder \
                (FILE.media) after it. To restore: stop the server, put the copy in place of the database \
                (removing its -wal and -shm files), restore the media folder, start the server. Devices \
                notice the older history on their next sync and rebuild: they pull everything again and \
                send again their own writes the backup lacks. Members removed and tokens revoked after the \
                backup come back with it: do those again.
                """)

        @OptionGroup var target: Target
        @Option(help: "The new file to write the copy to.") var to: String

        func run() async throws {
            let server = try target.server()
            do {
                try await server.backUp(to: to, by: AdminCommand.actor)
            } catch {
                throw CommandFailure("\(error)")
            }
            print("backed up \(target.db ?? "") to \(to); copy the media folder now")
        }
    }
}
