import COutpostSQLite

/// SQLite settings that hold for a whole process, made once before its first connection opens.
public enum SQLiteProcessSettings {
    /// Turns off SQLite's memory statistics, which take one process-wide mutex on every allocation and
    /// free; connections on other threads (a store's writer and readers, a server's pool) queue on it.
    /// Only takes effect before SQLite's first connection in the process; returns whether it did.
    @discardableResult
    public static func apply() -> Bool { applied }

    private static let applied: Bool = outpost_sqlite3_disable_memory_statistics() == 0
}
