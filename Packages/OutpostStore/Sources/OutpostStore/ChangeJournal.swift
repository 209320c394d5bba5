import Foundation
import GRDB
import OutpostSchema

/// How a commit in one process reaches `changes()` subscribers in another (the app and its share
/// extension or widgets on one file). Each write transaction appends one row naming its records and
/// the store that wrote it, in the same transaction; a store with subscribers reads the rows other
/// stores appended, every `pollInterval`, and publishes them. A journal rather than SQLite's
/// `data_version`: that says only that something changed, not which records, and counts per
/// connection, which a pool of readers does not keep.
enum ChangeJournal {
    /// How often a store with subscribers looks for other stores' commits.
    static let pollInterval: Duration = .milliseconds(250)
    /// Rows kept: older ones are trimmed as new ones come. A subscriber that falls further behind
    /// (a process suspended for long) misses the oldest, as a UI that was not shown would.
    static let keptRows: Int64 = 2_000

    /// Appends one transaction's `changes`, written by `origin` (a `ClaimOwner`'s text).
    static func append(_ changes: [StoreChange], origin: String, in db: Database) throws {
        guard !changes.isEmpty else { return }
        var text = ""
        text.reserveCapacity(changes.count * 52)
        for change in changes {
            text += change.entity.rawValue
            text += " "
            text += change.recordID.storageText
            text += " "
            text += change.operation.rawValue
            text += "\n"
        }
        try db.cachedStatement(sql: "INSERT INTO change_journal (origin, changes) VALUES (?, ?)")
            .execute(arguments: [origin, text])
        let sequence = db.lastInsertedRowID
        if sequence % 256 == 0 {
            try db.cachedStatement(sql: "DELETE FROM change_journal WHERE seq <= ?").execute(arguments: [sequence - keptRows])
        }
    }

    /// The newest row's sequence, 0 for none.
    static func latest(in db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT coalesce(max(seq), 0) FROM change_journal") ?? 0
    }

    /// The changes other origins than `origin` appended after `sequence`, and the newest sequence read.
    static func changes(after sequence: Int64, notBy origin: String, in db: Database) throws -> (Int64, [StoreChange]) {
        var changes: [StoreChange] = []
        let newest = try read(after: sequence, through: .max, in: db) { rowOrigin, change in
            if rowOrigin != origin { changes.append(change) }
        }
        return (newest, changes)
    }

    /// Hands every change `origin` appended after `sequence` and up to `last` to `body`, one at a time (an
    /// import's notes, published once it committed, without holding them all in memory).
    static func forEachChange(
        by origin: String, after sequence: Int64, through last: Int64, in db: Database, _ body: (StoreChange) -> Void
    ) throws {
        _ = try read(after: sequence, through: last, in: db) { rowOrigin, change in
            if rowOrigin == origin { body(change) }
        }
    }

    /// Reads the rows after `sequence` up to `last`, handing each change with its row's origin to
    /// `body`; returns the newest sequence read.
    private static func read(
        after sequence: Int64, through last: Int64, in db: Database, _ body: (String, StoreChange) -> Void
    ) throws -> Int64 {
        var newest = sequence
        let rows = try Row.fetchCursor(
            db, sql: "SELECT seq, origin, changes FROM change_journal WHERE seq > ? AND seq <= ? ORDER BY seq",
            arguments: [sequence, last])
        while let row = try rows.next() {
            newest = row["seq"]
            let origin: String = row["origin"]
            for line in (row["changes"] as String).split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 3, let entity = EntityType(rawValue: String(parts[0])),
                    let id = UUID(uuidString: String(parts[1])), let operation = MutationOperation(rawValue: String(parts[2]))
                else { continue }
                body(origin, StoreChange(entity: entity, recordID: id, operation: operation))
            }
        }
        return newest
    }
}
