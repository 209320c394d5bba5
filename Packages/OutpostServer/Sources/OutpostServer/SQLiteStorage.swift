import Crypto
import Foundation
import GRDB
import OutpostConflicts
import OutpostModels
import OutpostSync

/// The embedded storage: one SQLite file in WAL mode, created and migrated on open. GRDB's pool has
/// one writer at a time, so the change sequence, taken inside each write transaction, commits in
/// order: a reader's snapshot never holds sequence n + 1 without n, and no pull skips a change.
final class SQLiteStorage: ServerStorage {
    let path: String
    private let pool: DatabasePool
    private let rules: PushRules

    /// Opens (creating and migrating) the database at `path`.
    init(path: String, assignsServerIDs: Bool) throws(ServerError) {
        self.path = path
        self.rules = PushRules(assignsServerIDs: assignsServerIDs)
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path)
        }
        do {
            _ = try ServerSchema.migrator.migrate(pool)
        } catch {
            throw ServerError(.migrationFailed, message: "\(error)", path: path)
        }
    }

    /// Runs `body` in a write transaction, turning anything but a `ServerError` into `databaseFailure`.
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerError) -> T {
        do {
            return try await pool.write(body)
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path)
        }
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerError) -> T {
        do {
            return try await pool.read(body)
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.databaseFailure, message: "\(error)", path: path)
        }
    }

    // MARK: - Tokens

    func caller(forTokenDigest digest: String) async throws(ServerError) -> Caller? {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT user_id FROM tokens WHERE token_sha256 = ?", arguments: [digest])
                .flatMap(UUID.init(uuidString:)).map(Caller.init(userID:))
        }
    }

    // MARK: - Push

    func push(_ mutations: [PushMutation], by caller: Caller, now: Date) async throws(ServerError) -> [MutationResult] {
        let rules = self.rules
        return try await write { db in
            var results: [MutationResult] = []
            results.reserveCapacity(mutations.count)
            for mutation in mutations {
                let key = mutation.idempotencyKey.storageText
                if let row = try Row.fetchOne(
                    db, sql: "SELECT user_id, outcome FROM applied_mutations WHERE idempotency_key = ?", arguments: [key])
                {
                    let outcome: MutationOutcome
                    if row["user_id"] as String == caller.userID.storageText {
                        let original = try WireJSON.decoder().decode(MutationOutcome.self, from: Data((row["outcome"] as String).utf8))
                        outcome = .duplicate(original: original)
                    } else {
                        // Someone else's key: never reveal its answer, and never apply it again.
                        outcome = .rejected(reason: ErrorBody(code: .forbidden, message: "this idempotency key belongs to another user"))
                    }
                    results.append(MutationResult(idempotencyKey: mutation.idempotencyKey, outcome: outcome))
                    continue
                }
                var outcome = MutationOutcome.rejected(reason: ErrorBody(code: .internal, message: "not applied"))
                try db.inSavepoint {
                    do {
                        outcome = try rules.apply(mutation, by: caller, in: db, now: now)
                        return .commit
                    } catch let error as ServerError where error.wireCode != nil {
                        outcome = .rejected(reason: error.errorBody)
                        return .rollback
                    }
                }
                try db.execute(
                    sql: """
                        INSERT INTO applied_mutations (idempotency_key, user_id, entity, record_id, outcome, applied_at)
                        VALUES (?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        key, caller.userID.storageText, mutation.entity.rawValue, mutation.recordID.storageText,
                        String(decoding: try WireJSON.encoder().encode(outcome), as: UTF8.self), now.milliseconds,
                    ])
                results.append(MutationResult(idempotencyKey: mutation.idempotencyKey, outcome: outcome))
            }
            return results
        }
    }

    // MARK: - Pull

    func pull(after cursor: Int64, limit: Int, projects: [UUID]?, by caller: Caller) async throws(ServerError)
        -> PullResponse
    {
        let rules = self.rules
        return try await read { db in
            var sql = "SELECT * FROM records WHERE sequence > ? AND "
            var arguments: StatementArguments = [cursor]
            if let projects {
                let mine = try Access.projects(of: caller, in: db)
                if let other = projects.first(where: { !mine.contains($0) }) {
                    throw ServerError.forbidden("you are not a member of project \(other.storageText)")
                }
                guard !projects.isEmpty else { return PullResponse(changes: [], nextCursor: String(cursor), hasMore: false) }
                // Placeholders only; the values stay parameters.
                sql += "project_id IN (\(Array(repeating: "?", count: projects.count).joined(separator: ", ")))"
                for project in projects { arguments += [project.storageText] }
            } else {
                sql += """
                    (project_id IN (SELECT project_id FROM memberships WHERE user_id = ?)
                     OR (project_id IS NULL AND owner_id = ?))
                    """
                arguments += [caller.userID.storageText, caller.userID.storageText]
            }
            sql += " ORDER BY sequence LIMIT ?"
            arguments += [limit + 1]
            let rows = try StoredRecord.fetchAll(db, sql: sql, arguments: arguments)
            let page = rows.prefix(limit)
            let keys = Set(page.map { RecordKey(entity: $0.entity, id: $0.id) })
            let changes = try page.map { try rules.wireRecord($0, page: keys, in: db) }
            return PullResponse(
                changes: changes, nextCursor: String(page.last?.sequence ?? cursor), hasMore: rows.count > limit)
        }
    }

    // MARK: - Media

    func mediaAttachment(_ id: UUID, by caller: Caller) async throws(ServerError) -> StoredRecord {
        try await read { db in
            guard let record = try StoredRecord.fetch(.mediaAttachment, id: id, in: db) else {
                throw ServerError.notFound("no media attachment \(id.storageText); push its record first")
            }
            guard try Access.canSee(record, caller, in: db) else {
                throw ServerError.forbidden("you are not a member of this attachment's project")
            }
            return record
        }
    }

    func mediaUpload(_ id: UUID) async throws(ServerError) -> MediaUploadState? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM media_uploads WHERE attachment_id = ?", arguments: [id.storageText])
                .map { row in
                    MediaUploadState(
                        totalBytes: row["total_bytes"], receivedBytes: row["received_bytes"], sha256: row["sha256"],
                        complete: row["complete"])
                }
        }
    }

    func setMediaUpload(_ state: MediaUploadState?, for id: UUID, now: Date) async throws(ServerError) {
        try await write { db in
            guard let state else {
                try db.execute(sql: "DELETE FROM media_uploads WHERE attachment_id = ?", arguments: [id.storageText])
                return
            }
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO media_uploads
                        (attachment_id, total_bytes, received_bytes, sha256, complete, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    id.storageText, state.totalBytes, state.receivedBytes, state.sha256, state.complete, now.milliseconds,
                ])
        }
    }

    // MARK: - Bundles

    func bundleRecords(project: UUID, by caller: Caller) async throws(ServerError) -> [EntityRecord] {
        try await read { db in
            guard let projectRecord = try StoredRecord.fetch(.project, id: project, in: db) else {
                throw ServerError.notFound("no project \(project.storageText)")
            }
            guard try Access.isMember(caller, of: project, in: db) else {
                throw ServerError.forbidden("you are not a member of project \(project.storageText)")
            }
            var records = try StoredRecord.fetchAll(
                db, sql: "SELECT * FROM records WHERE project_id = ?", arguments: [project.storageText])
            if case .uuid(let opportunity) = projectRecord.fields["opportunityID"] ?? .null,
                !records.contains(where: { $0.entity == .opportunity && $0.id == opportunity }),
                let linked = try StoredRecord.fetch(.opportunity, id: opportunity, in: db)
            {
                records.append(linked)
            }
            let order = Dictionary(uniqueKeysWithValues: EntityCatalog.all.enumerated().map { ($1.type, $0) })
            return records
                .sorted { ((order[$0.entity] ?? 0), $0.id.storageText) < ((order[$1.entity] ?? 0), $1.id.storageText) }
                .map(\.entityRecord)
        }
    }

    // MARK: - Seed

    func load(_ seed: ServerSeed, now: Date) async throws(ServerError) {
        try seed.validate()
        let rules = self.rules
        try await write { db in
            let stamp = HybridTimestamp(physicalMilliseconds: now.milliseconds, counter: 0, node: NodeID(0))
            let firstMember = seed.members.first?.userID ?? UUID(uuidString: "00000000-0000-0000-0000-000000000000")!
            for project in seed.projects where try StoredRecord.fetch(.project, id: project.id, in: db) == nil {
                let fields: [String: FieldValue] = [
                    "opportunityID": .null, "name": .text(project.name), "number": .null,
                    "address": .text(project.address ?? ""), "status": .text(Project.Status.active.rawValue),
                    "startDay": .null,
                ]
                try rules.insertSeeded(
                    .project, id: project.id, projectID: project.id, owner: firstMember, fields: fields, stamp: stamp,
                    in: db, now: now)
            }
            for member in seed.members {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO users (id, name) VALUES (?, ?)",
                    arguments: [member.userID.storageText, member.name])
                for project in member.projects {
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO memberships (project_id, user_id) VALUES (?, ?)",
                        arguments: [project.storageText, member.userID.storageText])
                    let id = Self.memberRecordID(project: project, user: member.userID)
                    guard try StoredRecord.fetch(.member, id: id, in: db) == nil else { continue }
                    let fields: [String: FieldValue] = [
                        "projectID": .uuid(project), "userID": .uuid(member.userID), "name": .text(member.name),
                        "email": .text(member.email ?? ""), "role": .text(member.role ?? Member.Role.crew.rawValue),
                    ]
                    try rules.insertSeeded(
                        .member, id: id, projectID: project, owner: member.userID, fields: fields, stamp: stamp, in: db,
                        now: now)
                }
            }
            for token in seed.tokens {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO tokens (token_sha256, user_id, created_at) VALUES (?, ?, ?)",
                    arguments: [TokenDigest.hex(of: token.token), token.userID.storageText, now.milliseconds])
            }
        }
    }

    /// The same membership always gets the same `member` record id, so a seed loads idempotently.
    static func memberRecordID(project: UUID, user: UUID) -> UUID {
        var bytes = Array(SHA256.hash(data: Data((project.storageText + "/" + user.storageText).utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x50  // version 5-style (name-based)
        bytes[8] = (bytes[8] & 0x3f) | 0x80  // RFC 4122 variant
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

/// Membership checks, shared by every route.
enum Access {
    static func isMember(_ caller: Caller, of project: UUID, in db: Database) throws -> Bool {
        try Bool.fetchOne(
            db, sql: "SELECT 1 FROM memberships WHERE project_id = ? AND user_id = ?",
            arguments: [project.storageText, caller.userID.storageText]) ?? false
    }

    static func projects(of caller: Caller, in db: Database) throws -> Set<UUID> {
        Set(try String.fetchAll(
            db, sql: "SELECT project_id FROM memberships WHERE user_id = ?", arguments: [caller.userID.storageText]
        ).compactMap(UUID.init(uuidString:)))
    }

    /// A record belongs to its project's members; an opportunity no project references yet, to its creator.
    static func canSee(_ record: StoredRecord, _ caller: Caller, in db: Database) throws -> Bool {
        guard let project = record.projectID else { return record.ownerID == caller.userID }
        return try isMember(caller, of: project, in: db)
    }
}

extension StoredRecord {
    init(row: Row) throws {
        let entityName: String = row["entity"]
        guard let entity = EntityType(rawValue: entityName), let id = UUID(uuidString: row["id"]),
            let owner = UUID(uuidString: row["owner_id"])
        else { throw ServerError(.databaseFailure, message: "a stored record has an unknown entity or id") }
        let decoder = WireJSON.decoder()
        let clockTexts = try decoder.decode([String: String].self, from: Data((row["clocks"] as String).utf8))
        var clocks: [String: HybridTimestamp] = [:]
        for (field, text) in clockTexts { clocks[field] = try HybridTimestamp(encoded: text) }
        self.init(
            entity: entity, id: id, serverID: row["server_id"], projectID: (row["project_id"] as String?).flatMap(UUID.init(uuidString:)),
            ownerID: owner, version: row["version"], sequence: row["sequence"],
            fields: try decoder.decode([String: FieldValue].self, from: Data((row["fields"] as String).utf8)),
            clocks: clocks, deletion: try (row["deletion"] as String?).map { text throws in try HybridTimestamp(encoded: text) },
            createdAt: Date(milliseconds: row["created_at"]), updatedAt: Date(milliseconds: row["updated_at"]))
    }

    static func fetch(_ entity: EntityType, id: UUID, in db: Database) throws -> StoredRecord? {
        try Row.fetchOne(
            db, sql: "SELECT * FROM records WHERE entity = ? AND id = ?", arguments: [entity.rawValue, id.storageText]
        ).map(StoredRecord.init(row:))
    }

    static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments) throws -> [StoredRecord] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).map(StoredRecord.init(row:))
    }

    /// Inserts or replaces the row.
    func save(in db: Database) throws {
        let encoder = WireJSON.encoder()
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO records (entity, id, server_id, project_id, owner_id, version, sequence, fields,
                    clocks, deletion, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                entity.rawValue, id.storageText, serverID, projectID?.storageText, ownerID.storageText, version, sequence,
                String(decoding: try encoder.encode(fields), as: UTF8.self),
                String(decoding: try encoder.encode(clocks.mapValues(\.encoded)), as: UTF8.self), deletion?.encoded,
                createdAt.milliseconds, updatedAt.milliseconds,
            ])
    }
}

extension UUID {
    /// Lowercase text, the form every id is stored and compared in.
    var storageText: String { uuidString.lowercased() }
}

extension Date {
    var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
