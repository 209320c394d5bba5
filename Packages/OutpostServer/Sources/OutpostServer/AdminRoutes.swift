import Foundation
import HTTPTypes
import Hummingbird
import OutpostSchema
import OutpostWire

/// The admin API: what `outpost admin` does, over HTTP, for an operator's own tools. Every route takes
/// an admin token only (`SyncServer.issueToken(admin: true)`; 401 without a valid one, 403 for a
/// member's token) and acts through the same `SyncServer` calls as the commands, so both keep one set of
/// rules and write one admin log, which names the admin token's user as the actor.
///
/// Bodies and answers are small JSON objects (`schemas/sync-api.yaml`, tag `admin`); the protocol's
/// version headers are not asked for, as an operator's `curl` sends none.
extension SyncServer {
    /// The largest admin request body: each is a handful of short fields.
    static let maximumAdminBodyBytes = 64 * 1024

    func addAdminRoutes(to router: Router<ServerRequestContext>) {
        let server = self

        router.get("admin/log") { request, _ -> Response in
            _ = try await server.authenticateAdministrator(request)
            let limit = try request.uri.queryParameters.get("limit").map { text throws(ServerError) -> Int in
                guard let limit = Int(text), (1...10_000).contains(limit) else {
                    throw ServerError.badRequest("limit is a whole number from 1 to 10000")
                }
                return limit
            } ?? 100
            let entries = try await server.adminLog(limit: limit).map(AdminLogEntryJSON.init)
            return try jsonResponse(AdminLogJSON(entries: entries), for: request)
        }

        router.post("admin/projects") { request, _ -> Response in
            let admin = try await server.authenticateAdministrator(request)
            var request = request
            let body = try await request.decode(CreateProjectJSON.self, limit: Self.maximumAdminBodyBytes)
            let project = try body.project()
            let created = try await Self.refusingBadInput { () async throws(ServerError) -> Bool in
                try await server.createProject(project, by: admin.actor)
            }
            guard created else {
                throw ServerError(status: 409, .alreadyExists, "a project \(project.id.storageText) exists on this server; nothing changed")
            }
            return try jsonResponse(CreatedProjectJSON(id: project.id), status: .created, for: request)
        }

        router.post("admin/projects/:projectID/archive") { request, context -> Response in
            let admin = try await server.authenticateAdministrator(request)
            let project = try Self.uuid(context.parameters.get("projectID"))
            var request = request
            let body = try await request.decode(ArchiveJSON.self, limit: Self.maximumAdminBodyBytes)
            let changed = try await server.archiveProject(project, archived: body.archived, by: admin.actor)
            return try jsonResponse(ChangedJSON(changed: changed), for: request)
        }

        router.get("admin/projects/:projectID/members") { request, context -> Response in
            _ = try await server.authenticateAdministrator(request)
            let project = try Self.uuid(context.parameters.get("projectID"))
            try await server.requireLiveProject(project)
            let members = try await server.members(of: project).map(MemberJSON.init)
            return try jsonResponse(MembersJSON(members: members), for: request)
        }

        router.put("admin/projects/:projectID/members/:userID") { request, context -> Response in
            let admin = try await server.authenticateAdministrator(request)
            let project = try Self.uuid(context.parameters.get("projectID"))
            let user = try Self.uuid(context.parameters.get("userID"))
            var request = request
            let body = try await request.decode(MembershipJSON.self, limit: Self.maximumAdminBodyBytes)
            // `addMember` checks the name and address by the admin API's rule (`adminTextProblem`), as for
            // every other way in; its refusal is this body's 400.
            let change = try await Self.refusingBadInput { () async throws(ServerError) -> MembershipChange in
                try await server.addMember(user, to: project, role: body.role, name: body.name, email: body.email, by: admin.actor)
            }
            return try jsonResponse(MembershipChangeJSON(change: "\(change)"), for: request)
        }

        router.delete("admin/projects/:projectID/members/:userID") { request, context -> Response in
            let admin = try await server.authenticateAdministrator(request)
            let project = try Self.uuid(context.parameters.get("projectID"))
            let user = try Self.uuid(context.parameters.get("userID"))
            try await server.requireLiveProject(project)
            let removed = try await server.removeMember(user, from: project, by: admin.actor)
            return try jsonResponse(RemovedJSON(removed: removed ? 1 : 0), for: request)
        }

        router.get("admin/tokens") { request, _ -> Response in
            _ = try await server.authenticateAdministrator(request)
            let user = try request.uri.queryParameters.get("userID").map { text throws(ServerError) -> UUID in
                guard let user = UUID(uuidString: text) else { throw ServerError.badRequest("userID is a UUID") }
                return user
            }
            let tokens = try await server.tokens(of: user).map(IssuedTokenJSON.init)
            return try jsonResponse(TokensJSON(tokens: tokens), for: request)
        }

        router.post("admin/tokens") { request, _ -> Response in
            let admin = try await server.authenticateAdministrator(request)
            var request = request
            let body = try await request.decode(IssueTokenJSON.self, limit: Self.maximumAdminBodyBytes)
            let expiresAt = try body.expiresIn().map { Timestamp.now().addingTimeInterval($0) }
            let token = try await Self.refusingBadInput { () async throws(ServerError) -> String in
                try await server.issueToken(for: body.userID, expiresAt: expiresAt, admin: body.admin ?? false, by: admin.actor)
            }
            return try jsonResponse(NewTokenJSON(token: token, expiresAt: expiresAt), status: .created, for: request)
        }

        router.post("admin/tokens/revoke") { request, _ -> Response in
            let admin = try await server.authenticateAdministrator(request)
            var request = request
            let body = try await request.decode(RevokeJSON.self, limit: Self.maximumAdminBodyBytes)
            let revoked: Int
            switch (body.token, body.name, body.userID) {
            case (let token?, nil, nil): revoked = try await server.revokeToken(token, by: admin.actor) ? 1 : 0
            case (nil, let name?, nil): revoked = try await server.revokeToken(named: name, by: admin.actor) ? 1 : 0
            case (nil, nil, let user?): revoked = try await server.revokeTokens(of: user, by: admin.actor)
            default: throw ServerError.badRequest("name one of the token, its name (digestPrefix) or the userID whose tokens go")
            }
            return try jsonResponse(RemovedJSON(removed: revoked), for: request)
        }
    }

    /// The administrator the request's bearer token belongs to (see `administrator(bearing:)`).
    private func authenticateAdministrator(_ request: Request) async throws(ServerError) -> Administrator {
        let admin = try await administrator(bearing: try Self.bearerToken(of: request))
        RequestAttribution.note("user", admin.userID)
        return admin
    }

    /// Runs `work`, answering input the operator's calls refuse as a seed's (an unknown role, a blank
    /// name, an expiry past ten years) as the 400 it is, not as the server's failure. (A user the server
    /// does not have is `not_found` already.)
    private static func refusingBadInput<T>(_ work: () async throws(ServerError) -> T) async throws(ServerError) -> T {
        do {
            return try await work()
        } catch where error.code == .invalidSeed {
            throw ServerError.badRequest(error.message, underlying: error)
        }
    }
}

/// A JSON answer with a status other than 200.
func jsonResponse(_ value: some Encodable, status: HTTPResponse.Status, for request: Request) throws -> Response {
    var response = try jsonResponse(value, for: request)
    response.status = status
    return response
}

// MARK: - The admin API's bodies and answers (`schemas/sync-api.yaml`, the `Admin…` components)

/// A key of an admin request body.
struct AdminKey: CodingKey, ExpressibleByStringLiteral {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
    init(stringLiteral value: String) { stringValue = value }
}

extension KeyedDecodingContainer {
    /// The value under `key`, nil when the key is absent; an explicit `null` is refused as the wrong
    /// type. The document gives optional fields no `null`, and taking one as "absent" would accept
    /// a body the document says is invalid.
    func decodeUnlessAbsent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        contains(key) ? try decode(type, forKey: key) : nil
    }
}

/// A name, an address or an e-mail address as the admin API takes it (`AdminText`): 1 to 200 Unicode
/// scalars, as JSON Schema counts a `maxLength`, and no control characters (PostgreSQL's text takes no
/// NUL, and a log line no line break); nil stays nil. A `name` (`AdminName`) is also more than white
/// space: the record it names requires one, and a blank one was refused by the record's check with a
/// message about the member record, for a body the API document called valid.
private func checkedText(_ text: String?, _ field: String, isName: Bool = false) throws(ServerError) -> String? {
    guard let text else { return nil }
    if let problem = adminTextProblem(text, isName: isName) { throw ServerError.badRequest("\(field) \(problem)") }
    return text
}

/// What is wrong with `text` as a name, an address or an e-mail address (`checkedText`'s rule), or
/// nil: the one rule for the admin API and a seed, which set up the same records.
func adminTextProblem(_ text: String, isName: Bool) -> String? {
    let scalars = text.unicodeScalars
    guard (1...200).contains(scalars.count), !scalars.contains(where: OneLineText.isUnprintable) else {
        return "is 1 to 200 characters, none of them control characters, line or paragraph separators, direction marks or overrides"
    }
    if isName, !scalars.contains(where: isVisible) { return "must be more than white space and invisible characters" }
    return nil
}

/// Whether `scalar` shows as something: not white space, not one of the format characters of the Basic
/// Multilingual Plane (a zero-width joiner, a direction mark, a soft hyphen), nor another of its
/// default-ignorable ones (a grapheme joiner, variation selectors, the Khmer inherent vowels; attack 86,
/// F4), not a filler that draws blank (the Hangul fillers, the Braille blank). Names of U+200D or U+3164 alone were taken, each
/// listed as nothing (attack 84, F3). The API document's `AdminName` names the same characters.
private func isVisible(_ scalar: Unicode.Scalar) -> Bool {
    guard !scalar.properties.isWhitespace else { return false }
    switch scalar.value {
    case 0x00ad, 0x034f, 0x0600...0x0605, 0x061c, 0x06dd, 0x070f, 0x0890, 0x0891, 0x08e2, 0x17b4, 0x17b5, 0x180b...0x180f,
        0x200b...0x200f, 0x202a...0x202e, 0x2060...0x2064, 0x2066...0x206f, 0xfe00...0xfe0f, 0xfeff, 0xfff9...0xfffb, 0x115f,
        0x1160, 0x3164, 0xffa0, 0x2800:
        return false
    default: return true
    }
}

struct CreateProjectJSON: Decodable {
    var id: UUID?
    var name: String
    var address: String?

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: AdminKey.self)
        id = try body.decodeUnlessAbsent(UUID.self, forKey: "id")
        name = try body.decode(String.self, forKey: "name")
        address = try body.decodeUnlessAbsent(String.self, forKey: "address")
    }

    /// The project to create: refused 400 for a name or an address outside `AdminText`.
    func project() throws(ServerError) -> ServerSeed.Project {
        ServerSeed.Project(
            id: id ?? UUID(), name: try checkedText(name, "name", isName: true) ?? name, address: try checkedText(address, "address"))
    }
}

struct CreatedProjectJSON: Encodable {
    var id: UUID
}

struct ArchiveJSON: Decodable {
    var archived: Bool

    init(from decoder: any Decoder) throws {
        archived = try decoder.container(keyedBy: AdminKey.self).decode(Bool.self, forKey: "archived")
    }
}

struct ChangedJSON: Encodable {
    var changed: Bool
}

struct MembershipJSON: Decodable {
    var name: String?
    var email: String?
    var role: String?

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: AdminKey.self)
        name = try body.decodeUnlessAbsent(String.self, forKey: "name")
        email = try body.decodeUnlessAbsent(String.self, forKey: "email")
        role = try body.decodeUnlessAbsent(String.self, forKey: "role")
    }
}

struct MembershipChangeJSON: Encodable {
    var change: String
}

struct RemovedJSON: Encodable {
    var removed: Int
}

struct MemberJSON: Encodable {
    var recordID: UUID
    var userID: UUID
    var role: String
    var details: [String: String]
    init(_ member: ScopeMember) {
        recordID = member.recordID
        userID = member.userID
        role = member.role
        details = member.details
    }
}

struct MembersJSON: Encodable {
    var members: [MemberJSON]
}

struct IssueTokenJSON: Decodable {
    var userID: UUID
    var expiresInSeconds: Int?
    var admin: Bool?

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: AdminKey.self)
        userID = try body.decode(UUID.self, forKey: "userID")
        expiresInSeconds = try body.decodeUnlessAbsent(Int.self, forKey: "expiresInSeconds")
        admin = try body.decodeUnlessAbsent(Bool.self, forKey: "admin")
    }

    /// How long the token lives: 1 s to 10 years; nil for a token that does not expire.
    func expiresIn() throws(ServerError) -> TimeInterval? {
        guard let expiresInSeconds else { return nil }
        guard (1...Int(SyncServer.longestTokenLife)).contains(expiresInSeconds) else {
            throw ServerError.badRequest("expiresInSeconds is from 1 to \(Int(SyncServer.longestTokenLife)) (ten years)")
        }
        return TimeInterval(expiresInSeconds)
    }
}

struct NewTokenJSON: Encodable {
    var token: String
    var expiresAt: Date?
}

struct RevokeJSON: Decodable {
    var token: String?
    var name: String?
    var userID: UUID?

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: AdminKey.self)
        token = try body.decodeUnlessAbsent(String.self, forKey: "token")
        name = try body.decodeUnlessAbsent(String.self, forKey: "name")
        userID = try body.decodeUnlessAbsent(UUID.self, forKey: "userID")
    }
}

struct IssuedTokenJSON: Encodable {
    var userID: UUID
    var digestPrefix: String
    var createdAt: Date
    var expiresAt: Date?
    var lastUsedAt: Date?
    var admin: Bool
    init(_ token: IssuedToken) {
        userID = token.userID
        digestPrefix = token.digestPrefix
        createdAt = token.createdAt
        expiresAt = token.expiresAt
        lastUsedAt = token.lastUsedAt
        admin = token.isAdmin
    }
}

struct TokensJSON: Encodable {
    var tokens: [IssuedTokenJSON]
}

struct AdminLogEntryJSON: Encodable {
    var sequence: Int64
    var at: Date
    var actor: String
    var action: String
    var details: String
    init(_ entry: AdminLogEntry) {
        sequence = entry.sequence
        at = entry.at
        actor = entry.actor
        action = entry.action
        details = entry.details
    }
}

struct AdminLogJSON: Encodable {
    var entries: [AdminLogEntryJSON]
}
