import Foundation
import OutpostSchema

/// What `outpost serve --seed FILE` loads: projects, the members who may see them, and their bearer
/// tokens, for demos and tests. Loading it twice changes nothing; tokens are stored hashed.
///
/// ```json
/// {"projects": [{"id": "…", "name": "Maple Street", "address": "12 Maple Street"}],
///  "members": [{"userID": "…", "name": "Alice", "email": "alice@example.com", "role": "foreman",
///               "projects": ["…"]}],
///  "tokens": [{"userID": "…", "token": "alice-demo-token"}]}
/// ```
///
/// The first operator is a member with no projects and an admin token (`"admin": true`).
public struct ServerSeed: Sendable, Hashable, Codable {
    /// A scope record to create (a field-service `project`, status `active`) unless it exists: its
    /// name and address where the scope entity declares them, every other field its initial value.
    public struct Project: Sendable, Hashable, Codable {
        /// The project's record id.
        public var id: UUID
        /// Its name.
        public var name: String
        /// Its site address; empty when absent.
        public var address: String?

        /// Creates a seeded project.
        public init(id: UUID, name: String, address: String? = nil) {
            self.id = id
            self.name = name
            self.address = address
        }
    }

    /// A user and the projects they belong to; each membership also becomes a `member` record.
    public struct Member: Sendable, Hashable, Codable {
        /// The user's id (a `member` record's `userID`).
        public var userID: UUID
        /// Display name.
        public var name: String
        /// Email; empty when absent.
        public var email: String?
        /// One of the schema's roles; its default role (the field-service schema's `crew`) when absent.
        public var role: String?
        /// The projects the user may see and write.
        public var projects: [UUID]

        /// Creates a seeded member.
        public init(userID: UUID, name: String, email: String? = nil, role: String? = nil, projects: [UUID]) {
            self.userID = userID
            self.name = name
            self.email = email
            self.role = role
            self.projects = projects
        }
    }

    /// A bearer token for a user; only its SHA-256 is stored.
    public struct Token: Sendable, Hashable, Codable {
        /// The user the token authenticates.
        public var userID: UUID
        /// The secret as clients send it.
        public var token: String
        /// When the token stops working (its next request gets 401 on every instance); nil for never. In
        /// a seed file, seconds since 2001-01-01 (Foundation's reference date), not since 1970.
        public var expiresAt: Date?
        /// Whether it is an admin token: it reaches the `/admin` routes and nothing else, while a
        /// member's token reaches the sync routes and never `/admin`. False when the seed file omits it.
        public var admin: Bool

        /// Creates a seeded token.
        public init(userID: UUID, token: String, expiresAt: Date? = nil, admin: Bool = false) {
            self.expiresAt = expiresAt
            self.userID = userID
            self.token = token
            self.admin = admin
        }

        private enum CodingKeys: String, CodingKey {
            case userID, token, expiresAt, admin
        }

        /// Reads a token of a seed file, where `admin` may be left out.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            userID = try container.decode(UUID.self, forKey: .userID)
            token = try container.decode(String.self, forKey: .token)
            expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
            admin = try container.decodeIfPresent(Bool.self, forKey: .admin) ?? false
        }
    }

    /// Projects to create.
    public var projects: [Project]
    /// Users and their memberships.
    public var members: [Member]
    /// Tokens to accept.
    public var tokens: [Token]
    /// Set for an operator's addition to a running server (`SyncServer.addMember`, `issueToken`): its
    /// members may name projects, and its tokens users, that the server already has rather than the seed.
    var extendsServer = false

    private enum CodingKeys: String, CodingKey {
        case projects, members, tokens
    }

    /// Creates a seed.
    public init(projects: [Project] = [], members: [Member] = [], tokens: [Token] = []) {
        self.projects = projects
        self.members = members
        self.tokens = tokens
    }

    /// Reads a seed file, refusing a key the seed does not have (`checkKeys`).
    public init(contentsOf url: URL) throws(ServerError) {
        let data: Data
        do {
            data = try Data(contentsOf: url)
            self = try JSONDecoder().decode(ServerSeed.self, from: data)
        } catch {
            throw ServerError(.invalidSeed, message: "\(error)", path: url.path, underlying: error)
        }
        try Self.checkKeys(of: data, path: url.path)
    }

    /// The keys each object of a seed file may have.
    private static let keys: [(place: String, keys: [String])] = [
        ("the seed", ["projects", "members", "tokens"]), ("projects", ["id", "name", "address"]),
        ("members", ["userID", "name", "email", "role", "projects"]), ("tokens", ["userID", "token", "expiresAt", "admin"]),
    ]

    /// Refuses a key no object of its place has: `JSONDecoder` skips it, and `"expiresIn": 3600` left a
    /// token that never expires, a member's `"admin": true` or a project's `"archived": true` did
    /// nothing, with the operator told nothing (attack 83). `data` has decoded as a seed already.
    private static func checkKeys(of data: Data, path: String) throws(ServerError) {
        guard let seed = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return }
        func check(_ object: [String: Any], _ place: String, _ allowed: [String]) throws(ServerError) {
            for key in object.keys.sorted() where !allowed.contains(key) {
                throw ServerError(
                    .invalidSeed, message: "\(place) has the key '\(key)', which a seed does not have: its keys are \(allowed.joined(separator: ", "))",
                    path: path)
            }
        }
        try check(seed, keys[0].place, keys[0].keys)
        for (place, allowed) in keys.dropFirst() {
            for (index, object) in ((seed[place] as? [Any]) ?? []).enumerated() {
                guard let object = object as? [String: Any] else { continue }
                try check(object, "\(place)[\(index)]", allowed)
            }
        }
    }

    /// The role `member` is given: theirs, or the schema's default role when they name none. Refused
    /// with the roles the schema declares when it names another, or none and the schema has no default.
    static func role(of member: Member) throws(ServerError) -> String {
        let schema = ServedSchema.current
        guard let role = member.role ?? schema.defaultRole else {
            throw ServerError(.invalidSeed, message: "member \(member.name) names no role: one of \(schema.roles.joined(separator: ", "))")
        }
        guard schema.rank(of: role) != nil else {
            throw ServerError(.invalidSeed, message: "member \(member.name) has unknown role '\(role)': one of \(schema.roles.joined(separator: ", "))")
        }
        return role
    }

    /// An operator's addition of projects and nothing else (`SyncServer.createProject`).
    var createsOnlyProjects: Bool { extendsServer && members.isEmpty && tokens.isEmpty }

    /// Refuses a seed that names a project it does not define or a token for an unknown user, and one
    /// that gives a token twice (the later entry silently won: a member's token could become an admin's)
    /// or with spaces around it (never usable: a request's token is read without them). A project, or a
    /// user's membership of one, given twice is refused too: the first entry silently won, so a user
    /// listed as owner and again as viewer stayed owner. Names, addresses and e-mails follow the admin
    /// API's rule (`adminTextProblem`).
    func validate() throws(ServerError) {
        func refuse(_ message: String) -> ServerError { ServerError(.invalidSeed, message: message) }
        var defined = Set<UUID>()
        for project in projects {
            let id = project.id.storageText
            guard defined.insert(project.id).inserted else { throw refuse("project \(id) is given twice: give it once") }
            if let problem = adminTextProblem(project.name, isName: true) { throw refuse("the name of project \(id) \(problem)") }
            if let address = project.address, !address.isEmpty, let problem = adminTextProblem(address, isName: false) {
                throw refuse("the address of project \(id) \(problem)")
            }
        }
        var memberships = Set<[UUID]>()
        for member in members {
            let user = member.userID.storageText
            for project in member.projects where !memberships.insert([member.userID, project]).inserted {
                throw refuse("user \(user) is given twice for project \(project.storageText): give each membership once, with its role")
            }
            if let problem = adminTextProblem(member.name, isName: true) { throw refuse("the name of user \(user) \(problem)") }
            if let email = member.email, !email.isEmpty, let problem = adminTextProblem(email, isName: false) {
                throw refuse("the e-mail of user \(user) \(problem)")
            }
        }
        let projectIDs = Set(projects.map(\.id))
        let userIDs = Set(members.map(\.userID))
        for member in members {
            if !extendsServer, let missing = member.projects.first(where: { !projectIDs.contains($0) }) {
                throw ServerError(.invalidSeed, message: "member \(member.name) names unknown project \(missing)")
            }
            _ = try Self.role(of: member)
        }
        for token in tokens where !extendsServer && !userIDs.contains(token.userID) {
            throw ServerError(.invalidSeed, message: "a token names unknown user \(token.userID)")
        }
        // As `SyncServer.issueToken` takes it: past ten years an expiry is a typo, and one no millisecond
        // count holds (1e300) stopped the server storing it (attack 83).
        for token in tokens {
            guard let expiry = token.expiresAt else { continue }
            guard expiry.timeIntervalSince1970 >= 0, expiry.timeIntervalSinceNow <= SyncServer.longestTokenLife + 60 else {
                throw refuse("a token of user \(token.userID.storageText) expires \(expiry.timeIntervalSinceReferenceDate) seconds after 2001-01-01, as a seed file counts expiresAt: a token expires between 1970 and ten years from now")
            }
        }
        if tokens.contains(where: { $0.token.count < 8 }) {
            throw ServerError(.invalidSeed, message: "tokens must be at least 8 characters")
        }
        if tokens.contains(where: { $0.token != $0.token.trimmingCharacters(in: .whitespacesAndNewlines) }) {
            throw ServerError(.invalidSeed, message: "a token begins or ends with a space or a line break, which no request can send")
        }
        if Set(tokens.map(\.token)).count != tokens.count {
            throw ServerError(.invalidSeed, message: "a token is given twice")
        }
    }
}
