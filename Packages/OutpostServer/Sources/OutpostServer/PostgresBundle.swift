import Foundation
import Logging
import OutpostSchema
import PostgresNIO

/// The consumer side of a streamed PostgreSQL bundle: each `next()` asks the producer task (which
/// holds the snapshot's transaction) for one page and waits for it.
///
/// Dropping the stream that owns this object finishes the request stream, and that ends the producer
/// and its transaction: a client that hangs up mid-download never leaves a connection held.
final class PostgresBundlePages: Sendable {
    /// One page asked for: nil after the last.
    typealias Request = CheckedContinuation<[BundleEntry]?, any Error>

    private let sink: AsyncStream<Request>.Continuation

    init(sink: AsyncStream<Request>.Continuation) {
        self.sink = sink
    }

    deinit {
        sink.finish()
    }

    /// The next page, nil once the producer has ended.
    func next() async throws -> [BundleEntry]? {
        try await withCheckedThrowingContinuation { (request: Request) in
            if case .terminated = sink.yield(request) { request.resume(returning: nil) }
        }
    }
}

/// Whether the bundle's opening (its checks and header) has been answered, so it is answered once.
final class PostgresBundleState: @unchecked Sendable {
    /// What the header says: the records' newest `updatedAt`, and the snapshot's checkpoint.
    struct Opening: Sendable {
        var asOf: Date?
        var checkpoint: HistoryCheckpoint
    }

    private let lock = NSLock()
    private var opened: CheckedContinuation<PostgresBundleState.Opening, any Error>?

    init(opened: CheckedContinuation<PostgresBundleState.Opening, any Error>) {
        self.opened = opened
    }

    /// Answers the opening with the header's date and checkpoint.
    func open(_ opening: Opening) {
        take()?.resume(returning: opening)
    }

    /// Answers the opening with `error`, unless it was answered already.
    func fail(_ error: any Error) {
        take()?.resume(throwing: error)
    }

    private func take() -> CheckedContinuation<PostgresBundleState.Opening, any Error>? {
        lock.lock()
        defer { lock.unlock() }
        let continuation = opened
        opened = nil
        return continuation
    }
}

/// Reads a project's records page by page in catalog order (parents first), by id within an entity,
/// with the keyset `(project_id, entity, id)` that the `records_by_project_entity` index serves.
struct PostgresBundleCursor {
    let project: UUID
    private var entities = EntityCatalog.all.map(\.type)[...]
    private var lastID = ""
    /// The records above the scope the project names that belong to no project yet, by entity: sent
    /// with that entity's records.
    private var aboveScope: [EntityType: [StoredRecord]] = [:]

    init(project: UUID) {
        self.project = project
    }

    /// Finds the project's linked opportunity; the newest `updatedAt` of all the bundle's records, and
    /// the newest change sequence of the project's records (deleted ones included).
    mutating func open(_ projectRecord: StoredRecord, for caller: Caller, on connection: PostgresConnection, logger: Logger)
        async throws -> (asOf: Date?, sequence: Int64)
    {
        var newest: Int64? = nil
        var sequence: Int64 = 0
        // Two statements, each one step of its index (`records_by_project_time`, `records_by_project`):
        // asked together, the planner reads every row of the project for both.
        for try await value in try await connection.query(
            "SELECT MAX(updated_at) FROM records WHERE project_id = \(project.storageText)", logger: logger
        ).decode(Int64?.self) {
            newest = value
        }
        for try await value in try await connection.query(
            "SELECT COALESCE(MAX(sequence), 0) FROM records WHERE project_id = \(project.storageText)", logger: logger
        ).decode(Int64.self) {
            sequence = value
        }
        for relation in ServedSchema.current.scopeParents {
            guard case .uuid(let above) = projectRecord.fields[relation.field] ?? .null,
                let linked = try await PostgresRecords.fetch(relation.entity, id: above, on: connection, logger: logger),
                // As the SQLite backend: never one another project owns, nor another user's (`PushRules.link`).
                linked.projectID == nil, linked.ownerID == caller.userID
            else { continue }
            aboveScope[relation.entity, default: []].append(linked)
            newest = max(newest ?? 0, linked.updatedAt.milliseconds)
            sequence = max(sequence, linked.sequence)
        }
        return (newest.map(Date.init(milliseconds:)), sequence)
    }

    /// The next non-empty page, nil after the last.
    mutating func next(on connection: PostgresConnection, logger: Logger) async throws -> [BundleEntry]? {
        while let entity = entities.first {
            // Bounded in bytes as the SQLite backend's pages are (`BundleRecords.pageBytes`), in the query:
            // rows stop once those before them reach the bound, so the rows past it are never sent (read
            // and dropped here, a project of 1 MiB records would send each page's 500 to keep 4).
            let rows = try await PostgresRecords.fetchRows(
                """
                SELECT \(unescaped: PostgresRecords.columns) FROM (
                  SELECT *, sum(octet_length(fields) + octet_length(clocks)) OVER (ORDER BY id) AS running_bytes,
                    octet_length(fields) + octet_length(clocks) AS row_bytes
                  FROM records
                  WHERE project_id = \(project.storageText) AND entity = \(entity.rawValue) AND id > \(lastID)
                    AND deletion IS NULL
                  ORDER BY id LIMIT \(BundleRecords.pageRecords)
                ) AS page
                WHERE running_bytes - row_bytes < \(BundleRecords.pageBytes)
                ORDER BY id
                """, on: connection, logger: logger)
            var page = rows.map(\.bundleEntry)
            // Cut by either bound, more may follow (at worst the next read finds none); else the entity is done.
            let bytes = rows.reduce(0) { $0 + $1.fieldsJSON.utf8.count + $1.clocksJSON.utf8.count }
            if rows.count == BundleRecords.pageRecords || bytes >= BundleRecords.pageBytes {
                lastID = page.last?.record.id.storageText ?? ""
            } else {
                entities = entities.dropFirst()
                lastID = ""
            }
            if let extra = aboveScope.removeValue(forKey: entity) {
                page += extra.map { BundleEntry($0.entityRecord) }
            }
            if !page.isEmpty {
                return page.sortedByStorageText(\.record.id)
            }
        }
        return nil
    }
}
