import Foundation
import OutpostSchema

/// A token as the operator sees it: whose, when it was made, until when it works and when it was last
/// used; never the secret (only its digest is stored), but the digest's first characters, to tell two
/// tokens of one user apart.
public struct IssuedToken: Sendable, Hashable {
    /// The user the token authenticates.
    public let userID: UUID
    /// The first 12 hex digits of the token's SHA-256: a name for it, not a secret.
    public let digestPrefix: String
    /// When it was issued.
    public let createdAt: Date
    /// When it stops working; nil for never.
    public let expiresAt: Date?
    /// When a request last used it, to the minute (noted at most once a minute per instance); nil if never.
    public let lastUsedAt: Date?
    /// Whether it is an admin token (reaches `/admin` only) rather than a member's (reaches sync only).
    public let isAdmin: Bool
}

/// One member of a scope record (a project) as the operator sees it: the live record of the schema's
/// membership entity naming them.
public struct ScopeMember: Sendable, Hashable {
    /// The member record's id.
    public let recordID: UUID
    /// The user it names.
    public let userID: UUID
    /// Their role, one of the schema's.
    public let role: String
    /// The record's text fields (a name, an e-mail address), for the listing.
    public let details: [String: String]
}

/// One entry of the admin log: what an operator did, who, and when. The log only grows: nothing in the
/// server changes or removes an entry.
public struct AdminLogEntry: Sendable, Hashable {
    /// Its place in the log, from 1.
    public let sequence: Int64
    /// When it was done.
    public let at: Date
    /// Who did it, as the tool that did it names them (`outpost admin` gives the account it ran as).
    public let actor: String
    /// What was done: `add-member`, `remove-member`, `issue-token`, `revoke-token`.
    public let action: String
    /// What it was done to and what came of it.
    public let details: String
}

/// When each token's last use was noted on this instance, so a busy token costs one write a minute.
final class TokenUseNotes: @unchecked Sendable {
    // @unchecked: `noted` is only touched under `lock`.
    private let lock = NSLock()
    private var noted: [String: Date] = [:]

    /// Whether a use of `digest` at `now` should be written (none noted in the last minute).
    func shouldNote(_ digest: String, now: Date) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if let last = noted[digest], now.timeIntervalSince(last) < 60 { return false }
        if noted.count > 100_000 { noted.removeAll() }
        noted[digest] = now
        return true
    }
}

extension SyncServer {
    /// The live members of `project`, by user id: those holding a membership, with the role their
    /// member record gives. A member record a device pushed for someone with no membership grants
    /// nothing, so it is not listed (an audit read it as an owner who reached nothing).
    public func members(of project: UUID) async throws(ServerError) -> [ScopeMember] {
        try await storage.prepare()
        let schema = ServedSchema.current
        let users = try await storage.memberUsers(of: project)
        return try await storage.memberRecords(of: project).compactMap { record -> ScopeMember? in
            guard case .uuid(let user)? = record.fields[schema.userField], case .text(let role)? = record.fields[schema.roleField],
                users.contains(user)
            else { return nil }
            var details: [String: String] = [:]
            for (name, value) in record.fields where name != schema.roleField {
                if case .text(let text) = value { details[name] = text }
            }
            return ScopeMember(recordID: record.id, userID: user, role: role, details: details)
        }.sorted { $0.userID.uuidString < $1.userID.uuidString }
    }

    /// The tokens of `user` (of every user when nil), newest first.
    public func tokens(of user: UUID?) async throws(ServerError) -> [IssuedToken] {
        try await storage.prepare()
        return try await storage.tokens(of: user)
    }

    /// The admin log's newest `limit` entries (at least 1), oldest first.
    public func adminLog(limit: Int = 100) async throws(ServerError) -> [AdminLogEntry] {
        // Refused, not read as 1: `outpost admin log --last 0` printed an entry where the route refuses 0.
        guard limit >= 1 else { throw ServerError.badRequest("the admin log is read 1 entry or more at a time, not \(limit)") }
        try await storage.prepare()
        return try await storage.adminLog(limit: limit)
    }

    /// Appends what an operator did to the admin log.
    /// Creates `project` (its record, which the devices of the members added to it then pull) when this
    /// server has no project with its id. Returns false when one exists, changed or deleted since: nothing
    /// changes then (a project's name is changed on a device, as any edit is). `actor` names who did it in
    /// the admin log. A project created here has no members until `addMember` adds them.
    @discardableResult
    public func createProject(_ project: ServerSeed.Project, by actor: String = "operator") async throws(ServerError) -> Bool {
        try await storage.prepare()
        // An operator's addition: loaded whatever was seeded before. Whether it created the project is
        // decided inside its transaction: a check before it let two callers (instances, or a device's
        // push of the same id) both be told "created" while one project was stored.
        var addition = ServerSeed(projects: [project])
        addition.extendsServer = true
        return try await storage.load(addition, now: Timestamp.now()) { created in
            [AdminLogLine(
                actor: actor, action: "create-project",
                // A refused creation names the name it was asked with as such: as "(name)" it read as the
                // existing project's (attack 84).
                details: created
                    ? "project \(project.id.storageText) (\(project.name)): created"
                    : "project \(project.id.storageText): exists, unchanged (asked as \(project.name))")]
        }
    }

    /// Archives `project` (`archived`, the default) or brings it back. An archived project takes no more
    /// changes from the next push on, on every instance: each mutation into it is refused
    /// `project_archived` (to its members only; to anyone else it stays as unseen as before), and the
    /// device keeps the change, shown as refused. Its members still pull it and download its bundle.
    /// Returns false when it already was so; a project this server does not have is `not_found`.
    @discardableResult
    public func archiveProject(_ project: UUID, archived: Bool = true, by actor: String = "operator") async throws(ServerError) -> Bool {
        try await storage.prepare()
        try await requireLiveProject(project)
        return try await storage.setArchived(project, archived, now: Timestamp.now()) { changed in
            AdminLogLine(
                actor: actor, action: archived ? "archive-project" : "unarchive-project",
                details: "project \(project.storageText): \(changed ? (archived ? "archived" : "brought back") : "unchanged")")
        }
    }

    /// 404 for a project this server does not have or holds deleted: the operator's tools act on live
    /// projects only (a member added to a deleted project, then archived and brought back, could write
    /// into it).
    func requireLiveProject(_ project: UUID) async throws(ServerError) {
        try await storage.prepare()
        guard let record = try await storage.record(ServedSchema.current.scope, id: project), record.deletion == nil else {
            throw ServerError.notFound("no project \(project.storageText) on this server")
        }
    }

    func log(_ action: String, by actor: String, _ details: String) async throws(ServerError) {
        try await storage.appendAdminLog(at: Timestamp.now(), actor: actor, action: action, details: details)
    }
}
