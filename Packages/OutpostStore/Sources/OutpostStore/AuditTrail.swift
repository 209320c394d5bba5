import Crypto
import Foundation
import GRDB
import OutpostModels

/// The append-only, hash-chained record of every local write. Each entry stores a canonical encoding
/// of the write and SHA-256(previous entry's hash ‖ that encoding), so editing, removing or reordering
/// any entry breaks the chain at that entry, and `verify` names it.
enum AuditTrail {
    /// The hash the first entry chains from.
    static let genesis = Data(repeating: 0, count: 32)

    /// One write as the chain records it; `payload` is the canonical encoding that is hashed.
    struct Entry {
        let seq: Int64
        let at: Int64
        let entity: String
        let recordID: String
        let operation: String
        let payload: Data
        let previousHash: Data
        let hash: Data
    }

    /// Appends the write to the chain, in the caller's transaction; returns the new entry's sequence.
    static func append(
        entity: EntityType, recordID: UUID, operation: MutationOperation, fields: [String: FieldValue], at: Date,
        in db: Database
    ) throws -> Int64 {
        let last = try Row.fetchOne(db.cachedStatement(sql: "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1"))
        let seq = (last?["seq"] as Int64? ?? 0) + 1
        let previous = last?["hash"] as Data? ?? genesis
        let at = at.storageMilliseconds
        let payload = try canonicalEncoding(
            seq: seq, at: at, entity: entity.rawValue, recordID: recordID.storageText, operation: operation.rawValue,
            fields: fields)
        try db.cachedStatement(sql: """
                INSERT INTO audit_log (seq, at, entity, record_id, operation, payload, previous_hash, hash)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(
            arguments: [
                seq, at, entity.rawValue, recordID.storageText, operation.rawValue, payload, previous,
                chainHash(previous: previous, payload: payload),
            ])
        return seq
    }

    /// Walks the chain from the first entry and reports the first one that does not hold.
    static func verify(_ db: Database) throws -> AuditReport {
        var previousHash = genesis
        var expectedSeq: Int64 = 1
        var count = 0
        let cursor = try Row.fetchCursor(
            db, sql: "SELECT seq, at, entity, record_id, operation, payload, previous_hash, hash FROM audit_log ORDER BY seq")
        while let row = try cursor.next() {
            let entry = Entry(
                seq: row[0], at: row[1], entity: row[2], recordID: row[3], operation: row[4], payload: row[5],
                previousHash: row[6], hash: row[7])
            func broken(_ reason: String) -> AuditReport {
                AuditReport(entriesChecked: count, firstBrokenEntry: entry.seq, problem: reason)
            }
            if entry.seq != expectedSeq {
                return broken("entry \(expectedSeq) is missing: the chain jumps to \(entry.seq)")
            }
            if entry.previousHash != previousHash {
                return broken("entry \(entry.seq) does not follow entry \(entry.seq - 1): removed or reordered")
            }
            // The hash covers the payload's bytes; the columns must say what the payload says.
            let hashed = try? JSONDecoder().decode(CanonicalWrite.self, from: entry.payload)
            if hashed?.seq != entry.seq || hashed?.at != entry.at || hashed?.entity != entry.entity
                || hashed?.id != entry.recordID || hashed?.op != entry.operation
            {
                return broken("entry \(entry.seq) was edited: its columns disagree with its hashed payload")
            }
            if chainHash(previous: entry.previousHash, payload: entry.payload) != entry.hash {
                return broken("entry \(entry.seq) was edited: its hash does not match its content")
            }
            previousHash = entry.hash
            expectedSeq += 1
            count += 1
        }
        return AuditReport(entriesChecked: count, firstBrokenEntry: nil, problem: nil)
    }

    static func chainHash(previous: Data, payload: Data) -> Data {
        var hasher = SHA256()
        hasher.update(data: previous)
        hasher.update(data: payload)
        return Data(hasher.finalize())
    }

    /// Deterministic JSON: sorted keys, the same bytes for the same write on every platform.
    static func canonicalEncoding(
        seq: Int64, at: Int64, entity: String, recordID: String, operation: String, fields: [String: FieldValue]
    ) throws -> Data {
        var json = CompactJSON()
        json.raw("{\"at\":")
        json.integer(at)
        json.raw(",\"entity\":")
        json.string(entity)
        json.raw(",\"fields\":")
        try json.fields(fields)
        json.raw(",\"id\":")
        json.string(recordID)
        json.raw(",\"op\":")
        json.string(operation)
        json.raw(",\"seq\":")
        json.integer(seq)
        json.raw("}")
        return json.data
    }

    private struct CanonicalWrite: Decodable {
        let seq: Int64
        let at: Int64
        let entity: String
        let id: String
        let op: String
        let fields: [String: FieldValue]
    }
}

/// The outcome of walking the audit chain.
public struct AuditReport: Sendable, Hashable, Codable {
    /// How many entries held before the walk stopped (all of them when the chain is intact).
    public let entriesChecked: Int
    /// The sequence number of the first entry that was edited, removed or reordered; nil when intact.
    public let firstBrokenEntry: Int64?
    /// What is wrong with that entry, in plain words.
    public let problem: String?

    /// Whether every entry holds.
    public var isIntact: Bool { firstBrokenEntry == nil }
}
