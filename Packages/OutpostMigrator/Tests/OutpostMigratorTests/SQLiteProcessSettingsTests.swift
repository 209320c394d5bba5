import Foundation
import GRDB
import GRDBSQLite
import OutpostMigrator
import Testing

@Suite struct SQLiteProcessSettingsTests {
    /// In a process of its own, where nothing opened SQLite before: `apply()` takes effect, and SQLite
    /// then counts none of the allocations a connection and its writes make.
    @Test func applyBeforeTheFirstConnectionTurnsTheStatisticsOff() async {
        await #expect(processExitsWith: .success) {
            guard SQLiteProcessSettings.apply() else { exit(1) }
            guard SQLiteProcessSettings.apply() else { exit(2) }
            let database = try TemporaryDatabase()
            try database.queue.write { db in
                try db.execute(sql: "CREATE TABLE t (x TEXT)")
                for index in 0..<100 { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [String(repeating: "x", count: index)]) }
            }
            exit(sqlite3_memory_used() == 0 ? 0 : 3)
        }
    }

    /// After a connection opened first, it is too late: `apply()` says so, and SQLite still counts.
    @Test func applyAfterTheFirstConnectionReportsThatItIsTooLate() async {
        await #expect(processExitsWith: .success) {
            let database = try TemporaryDatabase()
            try database.queue.write { try $0.execute(sql: "CREATE TABLE t (x TEXT)") }
            guard !SQLiteProcessSettings.apply() else { exit(1) }
            exit(sqlite3_memory_used() > 0 ? 0 : 3)
        }
    }
}
