import Crypto
import Foundation
import GRDB
import OutpostSchema

/// The append-only, hash-chained record of every local write. Each entry's hash is SHA-256(previous
/// entry's hash ‖ a canonical encoding of the write), so editing, removing or reordering any entry
/// breaks the chain at that entry, and `verify` names it.
///
/// Two stored forms verify side by side. Entries written before the compact form keep the whole
/// canonical encoding in `payload` (it repeats sequence, time, entity, id and operation, which are
/// columns too). Compact entries keep only the encoding of the fields; the verifier rebuilds the
/// canonical encoding from the columns and that payload, byte for byte what was hashed, so an edited
/// column or payload still breaks the hash. The hashed bytes are the same in both forms.
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
    /// `fields` is the write's fields as `JSONWriter.storedFields` encodes them; the write's queued mutation
    /// reads them from here (`"fieldsInAudit"`), so an entry is never edited or removed.
    static func append(
        entity: EntityType, recordID: UUID, operation: MutationOperation, fields payload: Data, at: Date,
        in db: Database
    ) throws -> Int64 {
        let last = try db.cachedStatement(sql: "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1").firstRow {
            ($0.integer(at: 0) ?? 0, $0.data(at: 1) ?? genesis)
        }
        let seq = (last?.0 ?? 0) + 1
        let previous = last?.1 ?? genesis
        let at = at.storageMilliseconds
        let id = recordID.storageText
        let canonical = canonicalEncoding(
            seq: seq, at: at, entity: entity.rawValue, recordID: id, operation: operation.rawValue, fields: payload)
        try db.cachedStatement(sql: """
                INSERT INTO audit_log (seq, at, entity, record_id, operation, payload, previous_hash, hash)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """).execute { row in
            row.bind(seq)
            row.bind(at)
            row.bind(entity.rawValue)
            row.bind(id)
            row.bind(operation.rawValue)
            row.bind(payload)
            row.bind(previous)
            row.bind(chainHash(previous: previous, payload: canonical))
        }
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
            let hashed: Data
            if entry.payload.starts(with: fullFormPrefix) {
                // The full form: the hash covers the payload's bytes; the columns must say what it says.
                let decoded = try? JSONDecoder().decode(CanonicalWrite.self, from: entry.payload)
                if decoded?.seq != entry.seq || decoded?.at != entry.at || decoded?.entity != entry.entity
                    || decoded?.id != entry.recordID || decoded?.op != entry.operation
                {
                    return broken("entry \(entry.seq) was edited: its columns disagree with its hashed payload")
                }
                hashed = entry.payload
            } else {
                // The compact form: the columns and the fields' encoding rebuild what was hashed.
                hashed = canonicalEncoding(
                    seq: entry.seq, at: entry.at, entity: entry.entity, recordID: entry.recordID,
                    operation: entry.operation, fields: entry.payload)
            }
            if chainHash(previous: entry.previousHash, payload: hashed) != entry.hash {
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

    /// How every full-form payload starts (its first key is `at`); a compact payload is a fields
    /// object, and no catalog field is called `at`.
    static let fullFormPrefix = Data("{\"at\":".utf8)

    /// Deterministic JSON: sorted keys, the same bytes for the same write on every platform. `fields`
    /// is the fields object's encoding (`JSONWriter.storedFields`: sorted keys).
    static func canonicalEncoding(
        seq: Int64, at: Int64, entity: String, recordID: String, operation: String, fields: Data
    ) -> Data {
        var json = JSONWriter(capacity: 160 + fields.count)
        json.raw("{\"at\":")
        json.integer(at)
        json.raw(",\"entity\":")
        json.string(entity)
        json.raw(",\"fields\":")
        json.json(fields)
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
