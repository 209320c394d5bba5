import Crypto
import Foundation
import GRDB
import OutpostSchema
import OutpostWire

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
    ///
    /// Stored primed where that is smaller (see `storedFields`), with an empty `previous_hash`: it is
    /// the entry before's hash, which the walk has in hand, and the entry's own hash still covers it.
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
        let hash = chainHash(previous: previous, payload: canonical)
        let stored = try primed(payload, entity: entity.rawValue, before: seq, in: db) ?? payload
        // X'' as a literal: GRDB may bind empty Data as NULL, which the column refuses.
        try db.cachedStatement(sql: """
                INSERT INTO audit_log (seq, at, entity, record_id, operation, payload, previous_hash, hash)
                VALUES (?, ?, ?, ?, ?, ?, X'', ?)
                """).execute { row in
            row.bind(seq)
            row.bind(at)
            row.bind(entity.rawValue)
            // The id's 16 bytes (toolkit step 6): 20 fewer than its text; the hash covers its text.
            row.bind(recordID.storageBytes)
            row.bind(operation.rawValue)
            row.bind(stored)
            row.bind(hash)
        }
        try writeHead(seq: seq, hash: hash, in: db)
        return seq
    }

    /// How far back (in entries) a primed entry's reference may be; past it, an entry is stored plain
    /// and becomes the next reference. Bounds the search each write makes.
    static let referenceReach: Int64 = 128
    /// The first byte of a primed payload; a compact one starts with `{`.
    static let primedMark: UInt8 = 0x00
    /// A primed entry inflates to at most this many times its stored bytes, plus `inflationAllowance`:
    /// the writer stores plain anything that would compress more, so a hostile entry cannot inflate
    /// further (attack 58 found 256 MiB per entry possible before this bound).
    static let inflationRatio = 64
    static let inflationAllowance = 4096
    /// And never past 64 KiB, whatever its size: priming is for small records (the writer stores
    /// larger fields compact), and a reader holds each entry whole while it hashes it (attack 59,
    /// finding 9: at the ratio alone, a 6.7 MB entry took verify to 1.3 GB).
    static let primedFieldsLimit = 64 * 1024

    /// The write's fields deflated against the newest plain entry of its entity within
    /// `referenceReach` (their names and shared values then cost a few bytes each):
    /// `[0x00][reference's sequence, LEB128][raw deflate]`. Nil when no reference is in reach, or
    /// when it would not be smaller or would pass the inflation bound.
    private static func primed(_ fields: Data, entity: String, before seq: Int64, in db: Database) throws -> Data? {
        let candidates = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT seq, CAST(payload AS BLOB) FROM audit_log WHERE seq >= ? AND entity = ? ORDER BY seq DESC"),
            arguments: [seq - referenceReach, entity])
        var reference: (seq: Int64, payload: Data)?
        while let row = try candidates.next() {
            let payload: Data = row[1]
            if form(of: payload) == .compact {
                reference = (row[0], payload)
                break
            }
        }
        guard let reference, fields.count <= primedFieldsLimit else { return nil }
        let compressed = PrimedDeflate.compress(fields, dictionary: reference.payload)
        var stored = Data([primedMark])
        var rest = UInt64(reference.seq)
        repeat {
            stored.append(UInt8(rest & 0x7F) | (rest >= 0x80 ? 0x80 : 0))
            rest >>= 7
        } while rest > 0
        stored.append(compressed)
        guard stored.count < fields.count, fields.count <= inflationRatio * compressed.count + inflationAllowance
        else { return nil }
        return stored
    }

    /// The three stored forms of a payload.
    enum Form { case full, compact, primed }

    static func form(of payload: Data) -> Form {
        if payload.first == primedMark { return .primed }
        return payload.starts(with: fullFormPrefix) ? .full : .compact
    }

    /// The fields' encoding a compact or primed entry `seq` of `entity` holds, as `canonicalEncoding` takes
    /// them: the one reader of entries, for the walk and for the queue (which reads a write's fields
    /// here). A full-form entry gives the fields object it holds. `reference` reads another entry's
    /// entity and payload. A primed entry's reference must be an earlier compact entry of the same
    /// entity, its sequence written in the fewest bytes; anything else is named as damage.
    static func storedFields(
        seq: Int64, entity: String, payload: Data, reference: (Int64) throws -> (entity: String, payload: Data)?
    ) throws -> Data {
        func damaged(_ reason: String) -> StoreError {
            StoreError(.databaseFailure, path: "", message: "audit entry \(seq) \(reason) (`outpost audit verify` names what changed)")
        }
        switch form(of: payload) {
        case .compact:
            return payload
        case .full:
            guard let decoded = try? JSONDecoder().decode(CanonicalWrite.self, from: payload) else {
                throw damaged("is unreadable")
            }
            var json = JSONWriter()
            try json.storedFields(decoded.fields)
            return json.data
        case .primed:
            var referenceSeq: UInt64 = 0
            var shift: UInt64 = 0
            var index = payload.startIndex + 1
            while true {
                guard index < payload.endIndex, shift < 63 else { throw damaged("names no readable reference") }
                let byte = payload[index]
                index += 1
                referenceSeq |= UInt64(byte & 0x7F) << shift
                shift += 7
                if byte & 0x80 == 0 {
                    // The fewest bytes: a last byte of 0 (after the first) is a longer spelling of the same number.
                    guard byte != 0 || shift == 7 else { throw damaged("names its reference in more bytes than it needs") }
                    break
                }
            }
            guard referenceSeq >= 1, referenceSeq < UInt64(seq) else {
                throw damaged("names entry \(referenceSeq) as its reference, which is not an earlier entry")
            }
            guard let named = try reference(Int64(referenceSeq)), named.entity == entity, form(of: named.payload) == .compact
            else { throw damaged("names entry \(referenceSeq) as its reference, which is not a plain entry of \(entity)") }
            let compressed = payload[index...]
            let limit = min(inflationRatio * compressed.count + inflationAllowance, primedFieldsLimit)
            switch PrimedDeflate.inflate(Data(compressed), dictionary: named.payload, limit: limit) {
            case .complete(let fields): return fields
            case .exceedsLimit: throw damaged("inflates past \(limit) bytes, more than the store ever writes")
            case .corrupt: throw damaged("does not inflate against its reference")
            }
        }
    }

    /// `storedFields` reading references from the table, for the queue.
    static func storedFields(seq: Int64, entity: String, payload: Data, in db: Database) throws -> Data {
        try storedFields(seq: seq, entity: entity, payload: payload) { try entry(at: $0, in: db) }
    }

    /// Entry `seq`'s entity and payload (as a blob), for a primed entry's reference.
    private static func entry(at seq: Int64, in db: Database) throws -> (entity: String, payload: Data)? {
        try db.cachedStatement(sql: "SELECT entity, CAST(payload AS BLOB) FROM audit_log WHERE seq = ?").firstRow(arguments: [seq]) {
            ($0.text(at: 0) ?? "", $0.data(at: 1) ?? Data())
        }
    }

    /// The `sync_state` key of the chain's head: the newest entry's sequence and hash, written in the
    /// same transaction as each entry. A chain cut short still holds from its start; its head names
    /// what was taken from its end (toolkit step 4 sets it for a chain an older build wrote).
    static let headKey = "audit_head"
    /// The `sync_state` key of the last queued change from before the file had an audit chain (which
    /// names no entry), as toolkit step 9 found it (0: none). Every later change names its entry.
    static let queuedBeforeChainKey = "audit_queued_before_chain"

    private static func writeHead(seq: Int64, hash: Data, in db: Database) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES (?, ?)")
            .execute(arguments: [headKey, "\(seq):\(hash.hexText)"])
    }

    /// Walks the chain from the first entry and reports the first one that does not hold.
    static func verify(_ db: Database) throws -> AuditReport {
        var previousHash = genesis
        var expectedSeq: Int64 = 1
        var count = 0
        // The plain entries primed ones were deflated against, by sequence: read once as the walk passes
        // them. Kept to the last 1,024 (a reference is at most `referenceReach` back; older ones are read again).
        var references: [Int64: (entity: String, payload: Data)] = [:]
        let cursor = try Row.fetchCursor(
            db, sql: """
                SELECT seq, at, entity, \(LocalStore.idTextSQL(of: "record_id")), operation, CAST(payload AS BLOB),
                       previous_hash, hash,
                       typeof(at) = 'integer' AND typeof(entity) = 'text' AND typeof(operation) = 'text'
                       AND (typeof(record_id) = 'text' OR (typeof(record_id) = 'blob' AND length(record_id) = 16))
                       AND instr(CAST(entity || operation AS BLOB), X'00') = 0
                       AND (typeof(record_id) = 'blob' OR instr(CAST(record_id AS BLOB), X'00') = 0)
                FROM audit_log ORDER BY seq
                """)
        while let row = try cursor.next() {
            func broken(seq: Int64, _ reason: String) -> AuditReport {
                AuditReport(entriesChecked: count, firstBrokenEntry: seq, problem: reason)
            }
            // Each column as the store writes it: a time stored as text or a fraction, or a name with a NUL
            // inside (which C-string readers cut off, so it would hash as the name before it), is an edit.
            // A record's id is its text (before step 6) or its 16 bytes, hashed as its text either way.
            let seq = row[0] as Int64
            guard row[8] as Bool? == true, let at = row[1] as Int64?, let entity = row[2] as String?,
                let recordID = row[3] as String?, let operation = row[4] as String?, let payload = row[5] as Data?,
                let storedPrevious = row[6] as Data?, let hash = row[7] as Data?
            else { return broken(seq: seq, "entry \(seq) was edited: a column holds what the store never writes there") }
            let entry = Entry(
                seq: seq, at: at, entity: entity, recordID: recordID, operation: operation, payload: payload,
                previousHash: storedPrevious, hash: hash)
            if entry.seq != expectedSeq {
                return broken(seq: entry.seq, "entry \(expectedSeq) is missing: the chain jumps to \(entry.seq)")
            }
            // An empty previous hash stands for the entry before's (every entry since the primed form).
            if !entry.previousHash.isEmpty && entry.previousHash != previousHash {
                return broken(seq: entry.seq, "entry \(entry.seq) does not follow entry \(entry.seq - 1): removed or reordered")
            }
            let hashed: Data
            switch form(of: entry.payload) {
            case .full:
                // The full form: the hash covers the payload's bytes; the columns must say what it says.
                let decoded = try? JSONDecoder().decode(CanonicalWrite.self, from: entry.payload)
                if decoded?.seq != entry.seq || decoded?.at != entry.at || decoded?.entity != entry.entity
                    || decoded?.id != entry.recordID || decoded?.op != entry.operation
                {
                    return broken(seq: entry.seq, "entry \(entry.seq) was edited: its columns disagree with its hashed payload")
                }
                hashed = entry.payload
            case .compact, .primed:
                // The columns and the fields' encoding rebuild what was hashed.
                let fields: Data
                do {
                    fields = try storedFields(seq: entry.seq, entity: entry.entity, payload: entry.payload) { seq in
                        try references[seq] ?? self.entry(at: seq, in: db)
                    }
                } catch {
                    return broken(seq: entry.seq, "entry \(entry.seq) was edited: \((error as? StoreError)?.message ?? "\(error)")")
                }
                hashed = canonicalEncoding(
                    seq: entry.seq, at: entry.at, entity: entry.entity, recordID: entry.recordID,
                    operation: entry.operation, fields: fields)
            }
            if chainHash(previous: previousHash, payload: hashed) != entry.hash {
                return broken(seq: entry.seq, "entry \(entry.seq) was edited: its hash does not match its content")
            }
            if form(of: entry.payload) == .compact {
                if references.count >= 1024 { references.removeAll(keepingCapacity: true) }
                references[entry.seq] = (entry.entity, entry.payload)
            }
            previousHash = entry.hash
            expectedSeq += 1
            count += 1
        }
        if let broken = try checkHead(lastSeq: expectedSeq - 1, lastHash: previousHash, checked: count, in: db) {
            return broken
        }
        return try checkQueue(checked: count, in: db)
            ?? AuditReport(entriesChecked: count, firstBrokenEntry: nil, problem: nil)
    }

    /// The head the store keeps must name the entry the walk ended on: a chain whose newest entries
    /// were removed (or all of them) holds from its start, and only the head tells.
    private static func checkHead(lastSeq: Int64, lastHash: Data, checked: Int, in db: Database) throws -> AuditReport? {
        let text = try String.fetchOne(
            db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = ?"), arguments: [headKey])
        guard let text else {
            return AuditReport(
                entriesChecked: checked, firstBrokenEntry: lastSeq + 1,
                problem: "the chain's head is missing: it was removed, and entries after \(lastSeq) may have gone with it")
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let headSeq = Int64(parts[0]) else {
            return AuditReport(
                entriesChecked: checked, firstBrokenEntry: lastSeq + 1, problem: "the chain's head is unreadable: it was edited")
        }
        if headSeq > lastSeq {
            return AuditReport(
                entriesChecked: checked, firstBrokenEntry: lastSeq + 1,
                problem: "the newest entries (\(lastSeq + 1) to \(headSeq)) were removed: the chain ends at \(lastSeq)")
        }
        if headSeq < lastSeq || String(parts[1]) != lastHash.hexText {
            return AuditReport(
                entriesChecked: checked, firstBrokenEntry: headSeq + 1,
                problem: "the chain does not end where its head says (entry \(headSeq)): entries were added or replaced outside the store")
        }
        return nil
    }

    /// Each queued write that keeps its fields in an audit entry (`"fieldsInAudit"`) must name the entry
    /// of the chain that records that very write: same entity, record, operation and time, as the queue
    /// reads it (`MutationQueue.auditFieldsColumn`). A row written whole may name an entry of its record
    /// only (a rebase turns a create into an update), and each value it sends that its user wrote (not
    /// one carried for a revival, nor one sent again after a server restore, which come from the row)
    /// must be one an entry of its record recorded for that field. Columns are read as SQL casts: a
    /// value stored in a form the store never writes is a mismatch, not a crash (attack 59, finding 3).
    private static func checkQueue(checked: Int, in db: Database) throws -> AuditReport? {
        // A change queued since the chain began names the entry of its write: one that names none was
        // written into the queue from outside, and went out as its user's write (attack 134, F6). With
        // the mark gone, every such row is named.
        if let unrecorded = try Row.fetchOne(db, sql: """
            SELECT seq, CAST(entity AS TEXT), CAST(record_id AS TEXT), CAST(operation AS TEXT) FROM mutation_queue
            WHERE audit_seq IS NULL
              AND seq > coalesce((SELECT CAST(value AS INTEGER) FROM sync_state WHERE key = ?), 0)
            ORDER BY seq LIMIT 1
            """, arguments: [queuedBeforeChainKey])
        {
            let sequence: Int64 = unrecorded[0]
            return AuditReport(
                entriesChecked: checked, firstBrokenEntry: nil,
                problem: "queued mutation \(sequence) (\(unrecorded[3] as String? ?? "") of \(unrecorded[1] as String? ?? "") "
                    + "\(unrecorded[2] as String? ?? "")) names no audit entry: the queue was edited",
                brokenMutation: sequence)
        }
        let rows = try Row.fetchAll(db, sql: """
            SELECT q.seq, CAST(q.entity AS TEXT), CAST(q.record_id AS TEXT), CAST(q.operation AS TEXT),
                   quote(q.audit_seq), instr(CAST(q.payload AS TEXT), '"fieldsInAudit":true') > 0, CAST(q.payload AS TEXT),
                   a.seq IS NOT NULL AND typeof(q.audit_seq) = 'integer',
                   a.entity IS q.entity AND \(LocalStore.idTextSQL(of: "a.record_id")) IS q.record_id,
                   a.operation IS q.operation AND a.at IS q.created_at
            FROM mutation_queue AS q LEFT JOIN audit_log AS a ON a.seq = q.audit_seq
            WHERE q.audit_seq IS NOT NULL OR instr(CAST(q.payload AS TEXT), '"fieldsInAudit":true') > 0
            ORDER BY q.seq
            """)
        var whole: [(sequence: Int64, key: String, payload: String)] = []
        for row in rows {
            let sequence: Int64 = row[0]
            let entity = row[1] as String? ?? "", recordID = row[2] as String? ?? "", operation = row[3] as String? ?? ""
            let named: String = row[4]
            func broken(_ reason: String) -> AuditReport {
                AuditReport(
                    entriesChecked: checked, firstBrokenEntry: nil,
                    problem: "queued mutation \(sequence) (\(operation) of \(entity) \(recordID)) \(reason): the queue was edited",
                    brokenMutation: sequence)
            }
            guard row[7] as Bool? == true else { return broken("names audit entry \(named), which does not exist") }
            guard row[8] as Bool? == true else { return broken("names audit entry \(named), which records a write of another record") }
            if row[5] as Bool? == true {
                guard row[9] as Bool? == true else { return broken("names audit entry \(named), which records another write of its record") }
            } else {
                whole.append((sequence, entity + "/" + recordID, row[6] as String? ?? ""))
            }
        }
        // Two rows that read their fields from one entry: one of them is not that entry's write.
        if let shared = try Row.fetchOne(db, sql: """
            SELECT max(seq), quote(audit_seq) FROM mutation_queue
            WHERE audit_seq IS NOT NULL AND instr(CAST(payload AS TEXT), '"fieldsInAudit":true') > 0
            GROUP BY audit_seq HAVING count(*) > 1 LIMIT 1
            """)
        {
            let sequence: Int64 = shared[0]
            return AuditReport(
                entriesChecked: checked, firstBrokenEntry: nil,
                problem: "queued mutation \(sequence) names audit entry \(shared[1] as String), which another queued mutation names too: the queue was edited",
                brokenMutation: sequence)
        }
        if let mismatch = try checkNewestRows(checked: checked, in: db) { return mismatch }
        guard !whole.isEmpty else { return nil }
        // What the chain recorded for the records of rows written whole, field by field.
        var recorded: [String: [String: [FieldValue]]] = [:]
        let keys = Set(whole.map(\.key))
        let recordID = LocalStore.idTextSQL(of: "record_id")
        let entries = try Row.fetchCursor(db, sql: """
            SELECT seq, CAST(entity AS TEXT), CAST(\(recordID) AS TEXT), CAST(payload AS BLOB) FROM audit_log
            WHERE \(recordID) IN (SELECT record_id FROM mutation_queue) ORDER BY seq
            """)
        while let entry = try entries.next() {
            let entity = entry[1] as String? ?? "", key = entity + "/" + (entry[2] as String? ?? "")
            guard keys.contains(key),
                let encoded = try? storedFields(seq: entry[0], entity: entity, payload: entry[3] as Data? ?? Data(), in: db),
                let fields = try? MutationQueue.decoder.decode([String: FieldValue].self, from: encoded)
            else { continue }
            for (name, value) in fields { recorded[key, default: [:]][name, default: []].append(value) }
        }
        for row in whole {
            func broken(_ reason: String) -> AuditReport {
                AuditReport(
                    entriesChecked: checked, firstBrokenEntry: nil,
                    problem: "queued mutation \(row.sequence) (\(row.key)) \(reason): the queue was edited", brokenMutation: row.sequence)
            }
            guard let payload = try? MutationQueue.Payload.read(row.payload, auditFields: nil, sequence: row.sequence) else {
                return broken("has an unreadable payload")
            }
            guard !payload.resent else { continue }
            for (name, value) in payload.fields where !payload.carried.contains(name) {
                if !(recorded[row.key]?[name]?.contains(value) ?? false) {
                    return broken("sends a value of \(name) that no audit entry of its record holds")
                }
            }
        }
        return nil
    }

    /// The newest row waiting to go (pending or in flight) of each record sends what the device shows:
    /// every write updates the row and the queue in one transaction, and a merge that keeps a server
    /// value takes that field out of the queue, or sends the merged value. A row pointed at an older
    /// write of its record, or edited to send something else, however consistently (time, flags), sends
    /// what the record does not hold (attack 59b, findings 10 and 11). Failed rows wait for a retry and
    /// are read again then; unreadable ones are the queue's to fail.
    private static func checkNewestRows(checked: Int, in db: Database) throws -> AuditReport? {
        let rows = try Row.fetchAll(db, sql: """
            SELECT *, \(MutationQueue.auditFieldsColumn) FROM mutation_queue
            WHERE status IN ('pending', 'inFlight') AND seq = (
                SELECT max(p.seq) FROM mutation_queue AS p
                WHERE p.entity = mutation_queue.entity AND p.record_id = mutation_queue.record_id
                  AND p.status IN ('pending', 'inFlight'))
            ORDER BY seq
            """)
        for row in rows {
            guard let entity = EntityType(rawValue: row["entity"] as String? ?? ""),
                let id = UUID(uuidString: row["record_id"] as String? ?? ""),
                let payload = try? MutationQueue.Payload.read(row, in: db),
                let record = try EntityTables.fetchRecord(entity, id: id, in: db)
            else { continue }
            for (name, value) in payload.fields.sorted(by: { $0.key < $1.key }) where record[name] != value {
                let sequence: Int64 = row["seq"]
                return AuditReport(
                    entriesChecked: checked, firstBrokenEntry: nil,
                    problem: "queued mutation \(sequence) (\(entity.rawValue) \(id.storageText)) sends a value of \(name) the record does not hold: the queue was edited",
                    brokenMutation: sequence)
            }
        }
        return nil
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

extension Data {
    /// Lowercase hex, as `lower(hex(…))` writes it in SQL (toolkit step 4 sets a head that way).
    fileprivate var hexText: String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(count * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: bytes, as: UTF8.self)
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

    /// The queued mutation that names an audit entry recording another write (or none), so it would
    /// send fields that are not its own; nil when every queued write names its own entry.
    public let brokenMutation: Int64?

    /// A report: `firstBrokenEntry` and `brokenMutation` nil when the chain and the queue hold.
    public init(entriesChecked: Int, firstBrokenEntry: Int64?, problem: String?, brokenMutation: Int64? = nil) {
        self.entriesChecked = entriesChecked
        self.firstBrokenEntry = firstBrokenEntry
        self.problem = problem
        self.brokenMutation = brokenMutation
    }

    /// Whether every entry holds, the chain ends where its head says, and every queued write names its own entry.
    public var isIntact: Bool { firstBrokenEntry == nil && brokenMutation == nil }
}
