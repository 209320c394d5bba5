import Foundation
import GRDB
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// A pulled record the device could not take in: it does not fit the catalog (a missing or unknown
/// field, a value of the wrong kind, a choice this app version does not know) or could not be
/// converted at all. It is skipped so the rest of its page and the cursor still apply (one bad record
/// must not stop sync for good), and kept here so the user and support can see what was not applied.
/// A later version of the record that fits is applied as usual and clears its entry. A record refused
/// for its shape alone is kept whole with its entry, so a later build of the app that can store it
/// (an update that taught it the field or the choice) applies it then (`PullReport.revived`).
public struct QuarantinedRecord: Sendable, Hashable {
    public let entity: EntityType
    public let recordID: UUID
    /// Why it was refused, in plain words.
    public let reason: String
    /// When it was last refused.
    public let quarantinedAt: Date

    /// Creates an entry; the sync engine makes one for a record it cannot even convert.
    public init(entity: EntityType, recordID: UUID, reason: String, quarantinedAt: Date) {
        self.entity = entity
        self.recordID = recordID
        self.reason = reason
        self.quarantinedAt = quarantinedAt
    }
}

extension LocalStore {
    /// Pulled records that were skipped because they could not be applied, oldest first.
    public func quarantinedRecords() throws(StoreError) -> [QuarantinedRecord] {
        try read { try Quarantine.all(in: $0) }
    }
}

/// The quarantine log. It lives in `sync_state`, one key per record (`quarantined`, entity and id,
/// separated by U+001F), since a table of its own would need a schema version the reference server
/// must accept first (see the package README).
enum Quarantine {
    private static let prefix = "quarantined\u{1F}"

    private struct Entry: Codable {
        var reason: String
        var stream: String
        var at: Int64
        /// The server's version of a record refused for its shape, as it arrived (before its
        /// references were translated), for a later build to apply; nil for a record that could not be
        /// converted or that another project owns, which no update of the app can make storable.
        var held: Held?
    }

    private struct Held: Codable {
        var record: EntityRecord
        var clocks: [String: HybridTimestamp]
        var deletion: HybridTimestamp?
    }

    private static func key(_ entity: EntityType, _ id: UUID) -> String {
        prefix + entity.rawValue + "\u{1F}" + id.storageText
    }

    /// Entries that hold a record at most: past them a refused record's entry keeps its reason alone
    /// (as entries from builds before holding do) and waits for a newer version. Held without a bound,
    /// a hostile server's pages of refused records grew the file by 83 MB in 30 s, and each process's
    /// first page read them all again (8 s a sync; attack 65 F4).
    static let maximumHeldEntries = 1_000
    /// The largest entry that holds its record, in encoded bytes; a larger record is not held.
    static let maximumHeldBytes = 256 << 10
    /// Entries at most. Past them a refusal is counted in the page's report but not logged: a hostile
    /// server's endless refused records grew the file 46 MB a minute, and each sync read them all
    /// (2.4 s; attack 66 F7). A refused record is a server's fault, never a write of the user's.
    static let maximumEntries = 10_000

    /// One page's additions: the entries are counted once, then kept count of, so the page holds records
    /// only while there are fewer than `maximumHeldEntries` and logs only while fewer than `maximumEntries`.
    struct PageLog {
        let stream: String
        private var entries: Int?

        init(stream: String) { self.stream = stream }

        mutating func add(_ record: QuarantinedRecord, held: VersionedRecord? = nil, in db: Database) throws {
            let count = try entries ?? Quarantine.count(in: db)
            entries = count
            guard count < maximumEntries else { return }
            try Quarantine.add(record, stream: stream, held: count < maximumHeldEntries ? held : nil, in: db)
            entries = count + 1
        }
    }

    /// Logs `record`'s refusal, holding `held` for a later build when it fits `maximumHeldBytes`.
    static func add(_ record: QuarantinedRecord, stream: String, held: VersionedRecord? = nil, in db: Database) throws {
        var entry = Entry(
            reason: ReportedMessage.bounded(record.reason), stream: stream, at: record.quarantinedAt.storageMilliseconds,
            held: held.map { Held(record: $0.record, clocks: $0.clocks, deletion: $0.deletion) })
        var encoded = try MutationQueue.encoder.encode(entry)
        if entry.held != nil, encoded.count > maximumHeldBytes {
            entry.held = nil
            encoded = try MutationQueue.encoder.encode(entry)
        }
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES (?, ?)").execute(
            arguments: [key(record.entity, record.recordID), String(decoding: encoded, as: UTF8.self)])
    }

    static func clear(_ entity: EntityType, _ id: UUID, in db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM sync_state WHERE key = ?").execute(arguments: [key(entity, id)])
    }

    /// The range of keys the entries live in: entity names and ids are ASCII, so DEL bounds it.
    private static var keyRange: StatementArguments { [prefix, prefix + "\u{7F}"] }

    /// The entity and id a key names, or nil for a key this build cannot read.
    private static func parse(_ key: String) -> (EntityType, UUID)? {
        let parts = key.dropFirst(prefix.count).components(separatedBy: "\u{1F}")
        guard parts.count == 2, let entity = EntityType(rawValue: parts[0]), let id = UUID(hyphenatedText: parts[1]) else {
            return nil
        }
        return (entity, id)
    }

    /// Entity and id of every entry, read by one range of keys: a pull clears only entries that exist.
    static func keys(in db: Database) throws -> [(EntityType, UUID)] {
        try String.fetchAll(db.cachedStatement(sql: "SELECT key FROM sync_state WHERE key >= ? AND key < ?"), arguments: keyRange)
            .compactMap(parse)
    }

    /// How many entries there are, for the status: counted by SQLite over the same range of keys.
    static func count(in db: Database) throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM sync_state WHERE key >= ? AND key < ?"), arguments: keyRange)
            ?? 0
    }

    /// Every entry whose key reads: entity, id and the stored text of its `Entry`.
    private static func entries(in db: Database) throws -> [(entity: EntityType, id: UUID, value: String)] {
        try Row.fetchAll(db, sql: "SELECT key, value FROM sync_state WHERE key >= ? AND key < ?", arguments: keyRange)
            .compactMap { row in parse(row["key"]).map { ($0.0, $0.1, row["value"]) } }
    }

    /// The held records of entries that this build's catalog can store now, oldest entry first. An
    /// entry that no longer reads, or whose record no longer converts, stays as it is.
    static func storableNow(in db: Database) throws -> [VersionedRecord] {
        let held = try entries(in: db).compactMap { entry -> (at: Int64, record: VersionedRecord)? in
            guard let entry = try? MutationQueue.decoder.decode(Entry.self, from: Data(entry.value.utf8)), let held = entry.held,
                problem(with: held.record) == nil,
                let record = try? VersionedRecord(record: held.record, clocks: held.clocks, deletion: held.deletion)
            else { return nil }
            return (entry.at, record)
        }
        return held.sorted { $0.at < $1.at }.map(\.record)
    }

    static func all(in db: Database) throws -> [QuarantinedRecord] {
        try entries(in: db).map { entity, id, value in
            let entry = try MutationQueue.decoder.decode(Entry.self, from: Data(value.utf8))
            return QuarantinedRecord(
                entity: entity, recordID: id, reason: entry.reason, quarantinedAt: Date(storageMilliseconds: entry.at))
        }.sorted { ($0.quarantinedAt, $0.recordID.storageText) < ($1.quarantinedAt, $1.recordID.storageText) }
    }

    /// Why the server's `record` cannot be stored whatever build of the app reads it, or nil (an honest
    /// server gives neither):
    /// - a version outside `SyncProtocol.recordVersions`: Int64.max was stored, and every real version after it was
    ///   ignored as older; one of 0 or below was dropped without a trace (attack 71, finding 4);
    /// - a text longer than any write may hold (`EntityRecord.maximumTextBytes`, what a bundle carries;
    ///   the server refuses one on push, `valueTooLong`): a hostile server's 20 MiB title, page after
    ///   page, grew the file 120 MB every 5 s (attack 64, finding 3). Text lengths only, read in place.
    ///
    /// A text holding a character no bundle carries is stored: the server may hold one written before
    /// that rule, and its record must stay editable (an XML export names the record and field).
    static func unstorableValue(in record: EntityRecord) -> String? {
        let version = record.sync.version
        let versions = SyncProtocol.recordVersions
        guard versions.contains(version) else {
            return "its version \(version) is outside \(versions.lowerBound)…\(versions.upperBound), the versions a server gives"
        }
        for (name, value) in record.fields {
            if case .text(let text) = value, text.utf8.count > EntityRecord.maximumTextBytes {
                return "\(name) has \(text.utf8.count) bytes; a text may have at most \(EntityRecord.maximumTextBytes), and no server takes a longer one"
            }
        }
        return nil
    }

    /// Why `record` cannot be stored as it is, or nil. Only the catalog's shape counts (a rule such as
    /// a blank required text is the server's to enforce, and the row can hold it). A parent reference
    /// held as text is a server id waiting for its mapping, not a wrong kind (see `ServerIDs`).
    static func problem(with record: EntityRecord) -> String? {
        let problems = record.shapeErrors()
        guard !problems.isEmpty else { return nil }
        let parents = Set(record.entity.description.parents.map(\.field))
        let refused = problems.filter { error in
            if error.code == .typeMismatch, let field = error.field, parents.contains(field),
                case .text = record[field]
            {
                return false
            }
            return true
        }
        return refused.isEmpty ? nil : refused.map(\.description).joined(separator: "; ")
    }
}
