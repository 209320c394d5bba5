import Foundation
import Logging
import OutpostSchema
import OutpostWire
import PostgresNIO

/// The push seam on PostgreSQL: load a `PushSnapshot` in a few set-based queries, run the rules in
/// memory, write the `PushPlan` with one statement per table. All of it runs in `PostgresStorage.write`,
/// so under the advisory lock every writer of the database holds until its commit.
extension PostgresStorage {
    static func loadSnapshot(for batch: PushBatch, on connection: PostgresConnection, logger: Logger) async throws
        -> PushSnapshot
    {
        var snapshot = PushSnapshot()
        if batch.createsProjects { snapshot.memberIDSalt = try await PostgresStorage.memberIDSalt(on: connection, logger: logger) }
        for try await (name, value) in try await connection.query(
            "SELECT name, value FROM counters", logger: logger
        ).decode((String, Int64).self) {
            switch name {
            case "change_sequence": snapshot.changeSequence = value
            case "server_id": snapshot.lastServerID = value
            default: break
            }
        }
        let keys = batch.idempotencyKeys.map(\.storageText)
        for try await (key, user, entity, record, outcome, digest) in try await connection.query(
            "SELECT idempotency_key, user_id, entity, record_id, outcome, change_digest FROM applied_mutations WHERE idempotency_key = ANY(\(keys))",
            logger: logger
        ).decode((String, String, String, String, String, String?).self) {
            guard let key = UUID(uuidString: key), let user = UUID(uuidString: user) else { continue }
            snapshot.applied[key] = AppliedMutation(
                userID: user, entity: entity, recordID: record, outcome: outcome, changeDigest: digest)
        }
        // Where each target belongs and how big it is first (octet_length reads a TOASTed value's length,
        // not the value), then whole only the ones the caller may see, within their bound.
        snapshot.access = try await PostgresAccess.access(of: batch.caller, on: connection, logger: logger)
        let targets = Array(batch.targets)
        var stored: [TargetSummary] = [], sizes: [RecordKey: StoredSize] = [:]
        for try await (entity, id, serverID, project, owner, sequence, deleted, updatedAt, bytes, writer) in try await connection.query(
            """
            SELECT r.entity, r.id, r.server_id, r.project_id, r.owner_id, r.sequence, r.deletion IS NOT NULL, r.updated_at,
                   octet_length(r.fields)::bigint + octet_length(r.clocks)::bigint, coalesce(r.written_by, r.owner_id) FROM records r
            JOIN unnest(\(targets.map(\.entity.rawValue))::text[], \(targets.map(\.id.storageText))::text[]) AS k(entity, id)
              ON r.entity = k.entity AND r.id = k.id
            """, logger: logger
        ).decode((String, String, Int64?, String?, String, Int64, Bool, Int64, Int64, String).self) {
            let summary = try PostgresRecords.summary((entity, id, serverID, project, owner, sequence))
            stored.append(TargetSummary(summary: summary, deleted: deleted, updatedAt: updatedAt))
            sizes[summary.key] = StoredSize(bytes: Int(bytes), writer: UUID(uuidString: writer) ?? summary.ownerID)
        }
        let toRead = batch.targetsToRead(among: stored, access: snapshot.access)
        for target in stored where !toRead.contains(target.summary.key) { snapshot.records[target.summary.key] = StoredRecord(unread: target) }
        var weighed = 0
        for key in toRead {
            try batch.weigh(sizes[key]?.bytes ?? 0, into: &weighed)
            snapshot.storedBytes[key] = sizes[key]
        }
        let projects = RecordBytesHolder.asked(access: snapshot.access, stored: stored)
        for try await (holder, id, bytes) in try await connection.query(
            """
            SELECT holder, id, bytes FROM record_usage
            WHERE (holder = 'project' AND id = ANY(\(projects))) OR (holder = 'writer' AND id = \(batch.caller.userID.storageText))
            """, logger: logger
        ).decode((String, String, Int64).self) {
            if let key = RecordBytesHolder(holder: holder, id: id) { snapshot.recordBytes[key] = bytes }
        }
        if !toRead.isEmpty {
            let read = Array(toRead)
            for row in try await PostgresRecords.fetchRows(
                """
                SELECT \(unescaped: PostgresRecords.qualifiedColumns) FROM records r
                JOIN unnest(\(read.map(\.entity.rawValue))::text[], \(read.map(\.id.storageText))::text[]) AS k(entity, id)
                  ON r.entity = k.entity AND r.id = k.id
                """, on: connection, logger: logger)
            {
                let record = try row.decoded()
                snapshot.records[record.key] = record
            }
        }
        let references = batch.references(stored: snapshot.records)
        let missing = Array(references.keys.filter { snapshot.records[$0] == nil })
        for summary in try await summaries(of: missing, on: connection, logger: logger) {
            snapshot.summaries[summary.key] = summary
        }
        let serverIDs = Array(references.serverIDs)
        if !serverIDs.isEmpty {
            for try await row in try await connection.query(
                """
                SELECT r.entity, r.id, r.server_id, r.project_id, r.owner_id, r.sequence FROM records r
                JOIN unnest(\(serverIDs.map(\.entity.rawValue))::text[], \(serverIDs.map(\.serverID))::bigint[])
                  AS k(entity, server_id) ON r.entity = k.entity AND r.server_id = k.server_id
                """, logger: logger
            ).decode((String, String, Int64?, String?, String, Int64).self) {
                let summary = try PostgresRecords.summary(row)
                snapshot.summaries[summary.key] = snapshot.summaries[summary.key] ?? summary
                if let serverID = summary.serverID {
                    snapshot.serverIDs[ServerIDKey(entity: summary.key.entity, serverID: serverID)] = summary.key
                }
            }
        }
        if !snapshot.access.projects.isEmpty {
            for try await project in try await connection.query(
                "SELECT project_id FROM archived_projects WHERE project_id = ANY(\(snapshot.access.projects.map(\.storageText)))",
                logger: logger
            ).decode(String.self) {
                if let id = UUID(uuidString: project) { snapshot.archivedProjects.insert(id) }
            }
        }
        for try await name in try await connection.query(
            "SELECT name FROM users WHERE id = \(batch.caller.userID.storageText)", logger: logger
        ).decode(String.self) { snapshot.callerName = name }
        if !batch.projects.isEmpty {
            for try await project in try await connection.query(
                "SELECT DISTINCT project_id FROM memberships WHERE project_id = ANY(\(batch.projects.map(\.storageText)))",
                logger: logger
            ).decode(String.self) {
                if let id = UUID(uuidString: project) { snapshot.projectsWithMembers.insert(id) }
            }
        }
        return snapshot
    }

    /// Summaries of the records among `keys` that exist.
    static func summaries(of keys: [RecordKey], on connection: PostgresConnection, logger: Logger) async throws
        -> [RecordSummary]
    {
        guard !keys.isEmpty else { return [] }
        var found: [RecordSummary] = []
        for try await row in try await connection.query(
            """
            SELECT r.entity, r.id, r.server_id, r.project_id, r.owner_id, r.sequence FROM records r
            JOIN unnest(\(keys.map(\.entity.rawValue))::text[], \(keys.map(\.id.storageText))::text[]) AS k(entity, id)
              ON r.entity = k.entity AND r.id = k.id
            """, logger: logger
        ).decode((String, String, Int64?, String?, String, Int64).self) {
            found.append(try PostgresRecords.summary(row))
        }
        return found
    }

    /// The plan's rows, one statement per table, and the counters' final values.
    static func write(_ plan: PushPlan, on connection: PostgresConnection, logger: Logger) async throws {
        let records = plan.records.values.sorted { $0.sequence < $1.sequence }
        try await PostgresRecords.save(records, on: connection, logger: logger)
        for (key, move) in plan.moves {
            try await connection.query(
                """
                UPDATE records SET project_id = \(move.projectID.storageText), sequence = \(move.sequence)
                WHERE entity = \(key.entity.rawValue) AND id = \(key.id.storageText)
                """, logger: logger)
        }
        if !plan.memberships.isEmpty {
            try await connection.query(
                """
                WITH added AS (
                    INSERT INTO memberships (project_id, user_id)
                    SELECT * FROM unnest(\(plan.memberships.map(\.projectID.storageText))::text[],
                                         \(plan.memberships.map(\.userID.storageText))::text[])
                    ON CONFLICT DO NOTHING RETURNING project_id, user_id)
                INSERT INTO membership_starts (project_id, user_id, added_at)
                SELECT project_id, user_id, \(Date().milliseconds) FROM added
                ON CONFLICT (project_id, user_id) DO UPDATE SET added_at = EXCLUDED.added_at
                """, logger: logger)
        }
        for restart in plan.roleRestarts {
            try await PostgresAccess.restartMembership(
                restart.projectID, restart.userID, at: Date().milliseconds, on: connection, logger: logger)
        }
        if !plan.applied.isEmpty {
            let now = Date().milliseconds
            try await connection.query(
                """
                INSERT INTO applied_mutations (idempotency_key, user_id, entity, record_id, outcome, applied_at, change_digest)
                SELECT k, u, e, r, o, \(now), d FROM unnest(
                    \(plan.applied.map(\.key.storageText))::text[], \(plan.applied.map(\.userID.storageText))::text[],
                    \(plan.applied.map(\.entity.rawValue))::text[], \(plan.applied.map(\.recordID.storageText))::text[],
                    \(plan.applied.map(\.outcome))::text[], \(plan.applied.map(\.changeDigest))::text[]) AS a(k, u, e, r, o, d)
                """, logger: logger)
        }
        if let keep = plan.answersToKeep {
            let user = keep.userID.storageText
            try await connection.query(
                """
                DELETE FROM applied_mutations WHERE user_id = \(user) AND applied_at < (
                    SELECT applied_at FROM applied_mutations WHERE user_id = \(user) ORDER BY applied_at DESC LIMIT 1 OFFSET \(keep.count))
                """, logger: logger)
        }
        try await connection.query(
            """
            UPDATE counters SET value = CASE name WHEN 'change_sequence' THEN \(plan.changeSequence)
                                                  ELSE \(plan.lastServerID) END
            WHERE name IN ('change_sequence', 'server_id')
            """, logger: logger)
    }
}
