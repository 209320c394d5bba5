import GRDB

/// The `sync_state` table's values by key: what the device keeps of its standing with the server
/// beside the records (checkpoints, bundle positions, its own sequences), one text per key.
enum SyncState {
    static func value(of key: String, in db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM sync_state WHERE key = ?"), arguments: [key])
    }

    /// Sets `key` to `value`; nil removes it.
    static func set(_ key: String, to value: String?, in db: Database) throws {
        if let value {
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO sync_state (key, value) VALUES (?, ?)").execute(arguments: [key, value])
        } else {
            try db.cachedStatement(sql: "DELETE FROM sync_state WHERE key = ?").execute(arguments: [key])
        }
    }

    /// A list kept space-separated under `key`: empty when the key is absent.
    static func list(of key: String, in db: Database) throws -> [String] {
        try value(of: key, in: db)?.split(separator: " ").map(String.init) ?? []
    }

    /// Keeps `items` space-separated under `key`; none removes it.
    static func setList(_ key: String, to items: [String], in db: Database) throws {
        try set(key, to: items.isEmpty ? nil : items.joined(separator: " "), in: db)
    }
}
