internal import COutpostSQLite

/// SQLite settings that hold for a whole process, made once before its first connection opens.
public enum SQLiteProcessSettings {
    /// Turns off SQLite's memory statistics, which take one process-wide mutex on every allocation and
    /// free; connections on other threads (a store's writer and readers, a server's pool) queue on it.
    /// Only the first call acts, and only before SQLite's first connection in the process; every call
    /// returns whether that first call took effect.
    @discardableResult
    public static func apply() -> Bool { applied }

    private static let applied: Bool = outpost_sqlite3_disable_memory_statistics() == 0
}
