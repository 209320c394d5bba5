import GRDB
import GRDBSQLite
import Testing
import OutpostMigrator

/// `SQLiteProcessSettings.apply()` must tell the truth: whether this process's SQLite counts its
/// allocations depends on which test opened a connection first, so the check covers both answers.
@Suite struct SQLiteProcessSettingsTests {
    @Test func applyReportsWhetherSQLiteStillCountsItsAllocations() throws {
        let tookEffect = SQLiteProcessSettings.apply()
        #expect(SQLiteProcessSettings.apply() == tookEffect, "a second call answers the same")
        let database = try TemporaryDatabase()
        try database.queue.write { db in
            try db.execute(sql: "CREATE TABLE t (x TEXT)")
            for index in 0..<100 { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [String(repeating: "x", count: index)]) }
        }
        if tookEffect {
            #expect(sqlite3_memory_used() == 0, "statistics are off, so SQLite has counted nothing")
        } else {
            #expect(sqlite3_memory_used() > 0, "SQLite was initialized first, so it still counts")
        }
    }
}
