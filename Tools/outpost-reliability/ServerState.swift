import Foundation
import GRDB
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire

/// What a server's database file holds, read straight from SQLite: every record (ids and fields as the
/// server keeps them; server ids, sequences and clocks left out, since they differ between runs of the
/// same workload) and every idempotency key it answered.
struct ServerState {
    struct Record: Equatable {
        var version: Int64
        var deleted: Bool
        /// Each field's one-key JSON, with sorted keys, so equal values compare equal as text.
        var fields: [String: String]
    }

    /// Records by "entity/id".
    var records: [String: Record] = [:]
    /// Idempotency keys whose original answer was `applied`, with the record each named.
    var appliedKeys: [String: String] = [:]
    /// Every idempotency key the server answered, whatever the outcome.
    var answeredKeys = 0

    static func read(databasePath: String) throws -> ServerState {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: databasePath, configuration: configuration)
        return try queue.read { db in
            var state = ServerState()
            for row in try Row.fetchAll(db, sql: "SELECT entity, id, version, fields, deletion FROM records") {
                let entity: String = row["entity"], id: String = row["id"]
                let fieldsText: String = row["fields"]
                let deletion: String? = row["deletion"]
                let fields = try normalizedFields(fieldsText)
                // The server's own member records (the seed's, a device-made project's creator's) have ids
                // salted per server, so two runs of one seed name them apart: keyed by whom they name.
                var key = "\(entity)/\(id)"
                if entity == "member", let project = fields["projectID"], let user = fields["userID"],
                    state.records["member/\(project)/\(user)"] == nil
                {
                    key = "member/\(project)/\(user)"
                }
                state.records[key] = Record(version: row["version"], deleted: deletion != nil, fields: fields)
            }
            for row in try Row.fetchAll(db, sql: "SELECT idempotency_key, entity, record_id, outcome FROM applied_mutations") {
                state.answeredKeys += 1
                let outcome: String = row["outcome"]
                let object = try JSONSerialization.jsonObject(with: Data(outcome.utf8)) as? [String: Any]
                if object?["status"] as? String == "applied" {
                    let key: String = row["idempotency_key"], entity: String = row["entity"], id: String = row["record_id"]
                    state.appliedKeys[key.lowercased()] = "\(entity)/\(id)"
                }
            }
            return state
        }
    }

    private static func normalizedFields(_ text: String) throws -> [String: String] {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return [:] }
        var fields: [String: String] = [:]
        for (name, value) in object {
            let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
            fields[name] = String(decoding: data, as: UTF8.self)
        }
        return fields
    }

    /// Differences from `reference`, split into records missing here (lost), records only here
    /// (duplicated) and records whose fields or deletion differ (diverged).
    func differences(from reference: ServerState) -> (lost: [String], duplicated: [String], diverged: [String]) {
        var lost: [String] = [], duplicated: [String] = [], diverged: [String] = []
        for (key, expected) in reference.records.sorted(by: { $0.key < $1.key }) {
            guard let actual = records[key] else {
                lost.append("\(key) is missing")
                continue
            }
            if actual.deleted != expected.deleted {
                diverged.append("\(key): deleted \(actual.deleted), the fault-free run says \(expected.deleted)")
            }
            for name in Set(expected.fields.keys).union(actual.fields.keys).sorted()
            where actual.fields[name] != expected.fields[name] {
                diverged.append("\(key).\(name): \(actual.fields[name] ?? "absent"), the fault-free run says \(expected.fields[name] ?? "absent")")
            }
        }
        for key in records.keys.sorted() where reference.records[key] == nil {
            duplicated.append("\(key) exists only in the run with faults")
        }
        return (lost, duplicated, diverged)
    }
}

/// Checks a device against the server as its member sees it, the way the demo does: each record the
/// server returns is on the device at the same version, deletion and values (references through the
/// device's server-id mapping), and the device holds no live record the server did not return (one an
/// import or a lost history left). Returns the records compared and the mismatches.
func compare(_ store: LocalStore, with transport: HTTPTransport) async throws -> (compared: Int, mismatches: [String]) {
    var cursor: String?
    var compared = 0
    var mismatches: [String] = []
    var returned: Set<String> = []
    while true {
        let page = try await transport.pull(PullRequest(cursor: cursor, limit: 500))
        for record in page.changes {
            compared += 1
            returned.insert("\(record.entity.rawValue)/\(record.recordID)")
            guard let local = try store.record(record.entity, id: record.recordID) else {
                // A device stores nothing for the tombstone of a record it never held.
                if !record.isDeleted { mismatches.append("\(record.entity.rawValue)/\(record.recordID) is missing on the device") }
                continue
            }
            if local.sync.version != record.version || local.sync.isDeleted != record.isDeleted {
                mismatches.append(
                    "\(record.entity.rawValue)/\(record.recordID): device version \(local.sync.version) deleted \(local.sync.isDeleted), "
                        + "server version \(record.version) deleted \(record.isDeleted)")
                continue
            }
            let references = Dictionary(uniqueKeysWithValues: record.entity.description.parents.map { ($0.field, $0.entity) })
            for (field, serverValue) in record.fields.sorted(by: { $0.key < $1.key }) {
                let localValue = local[field]
                if localValue == serverValue { continue }
                if case .text(let serverID) = serverValue, case .uuid(let clientID) = localValue, let parent = references[field],
                    try store.serverID(of: parent, clientID: clientID) == serverID
                {
                    continue
                }
                mismatches.append("\(record.entity.rawValue)/\(record.recordID).\(field): device \(localValue), server \(serverValue)")
            }
        }
        cursor = page.nextCursor
        if !page.hasMore { break }
    }
    var configuration = Configuration()
    configuration.readonly = true
    let queue = try DatabaseQueue(path: store.path, configuration: configuration)
    defer { try? queue.close() }
    let held = try await queue.read { db in
        try EntityCatalog.all.flatMap { description in
            try UUID.fetchAll(db, sql: "SELECT id FROM \(description.table.quotedDatabaseIdentifier) WHERE deleted_at IS NULL")
                .map { "\(description.type.rawValue)/\($0)" }
        }
    }
    for key in held.sorted() where !returned.contains(key) {
        mismatches.append("\(key) is live on the device, and the server has no such record")
    }
    return (compared, mismatches)
}

/// `PRAGMA integrity_check` of a database file: "ok" or what SQLite found.
func integrityCheck(_ path: String) throws -> String {
    let queue = try DatabaseQueue(path: path)
    return try queue.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; ") }
}

/// Every record a device's user wrote, as "entity/id" (lowercased), read from its file's audit chain,
/// which names each local write: the queue names only the writes not yet finished (a finished mutation
/// leaves it, its key kept).
func writtenRecords(devicePath: String) throws -> Set<String> {
    var configuration = Configuration()
    configuration.readonly = true
    let queue = try DatabaseQueue(path: devicePath, configuration: configuration)
    return try queue.read { db in
        Set(try Row.fetchAll(db, sql: "SELECT DISTINCT entity, \(LocalStore.idTextSQL(of: "record_id")) AS record_id FROM audit_log").map { row in
            "\(row["entity"] as String)/\((row["record_id"] as String).lowercased())"
        })
    }
}

/// The checks after a device's file was synced by processes that were killed (crash-sync, shared-file):
/// nothing left unsent (counted under `unsent`), no key applied that the device does not hold as done,
/// every record it wrote on the server, the device equal to the server, and its audit chain intact.
func checkSyncedDevice(
    db: String, serverDB: String, transport: HTTPTransport, unsent: WritableKeyPath<SeedOutcome, Int>,
    outcome: inout SeedOutcome
) async throws {
    let store = try LocalStore.open(at: db)
    let mutations = try store.mutations()
    for mutation in mutations where mutation.status != .done {
        outcome[keyPath: unsent] += 1
        outcome.problems.append(
            "\(mutation.operation) \(mutation.entity.rawValue)/\(mutation.recordID) left \(mutation.status)"
                + (mutation.lastError.map { " (\($0))" } ?? ""))
    }
    let state = try ServerState.read(databasePath: serverDB)
    let done = Set(try store.finishedMutationKeys().map { $0.uuidString.lowercased() })
    for (key, record) in state.appliedKeys.sorted(by: { $0.key < $1.key }) where !done.contains(key) {
        outcome.duplicated += 1
        outcome.problems.append("the server applied key \(key) (\(record)), which the device does not hold as done")
    }
    var written = try writtenRecords(devicePath: db)
    for mutation in mutations { written.insert("\(mutation.entity.rawValue)/\(mutation.recordID.uuidString.lowercased())") }
    for record in written.sorted() where state.records[record] == nil {
        outcome.lost += 1
        outcome.problems.append("\(record), written on the device, is not on the server")
    }
    let comparison = try await compare(store, with: transport)
    outcome.diverged += comparison.mismatches.count
    outcome.problems += comparison.mismatches
    let audit = try Child(["audit", "verify", "--db", db])
    let verdict = await audit.exit()
    if verdict.signaled || verdict.status != 0 {
        outcome.corrupt += 1
        outcome.problems.append("outpost audit verify: \(verdict)")
    }
}
