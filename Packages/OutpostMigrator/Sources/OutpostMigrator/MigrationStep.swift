import Crypto
import Foundation
import GRDB

/// One numbered change to a schema. A database is at version N when steps 1…N have been applied,
/// each in its own transaction. Once shipped, a step is never edited: its checksum is in the ledger.
public struct MigrationStep: Sendable {
    enum Body: Sendable {
        case sql(String)
        case closure(@Sendable (Database) throws -> Void)
    }

    /// The step's number, from 1 upwards without gaps.
    public let version: Int
    /// A short name for people ("add crew size to daily logs").
    public let name: String
    /// The SQL the step runs, when it is a SQL step (nil for a closure step).
    public let sql: String?
    /// SHA-256 (hex) of the step's SQL, or of the fingerprint a closure step declares.
    public let checksum: String
    /// Indexes the step drops because another index of their table begins with their columns (the same
    /// first column, the others in any order): the only removal the migrator accepts, each one checked
    /// against the schema the step leaves.
    public let redundantIndexes: Set<String>
    let body: Body

    /// A step that runs `sql` (one or more statements). `droppingRedundantIndexes` names the indexes
    /// its SQL drops because another index of the same table begins with their columns (the same first
    /// column, the others in any order), so every lookup they served still seeks on them; any other
    /// removal is refused.
    public init(version: Int, name: String, sql: String, droppingRedundantIndexes redundantIndexes: Set<String> = []) {
        precondition(version >= 1, "Migration step versions start at 1")
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = Self.digest(sql)
        self.redundantIndexes = redundantIndexes
        self.body = .sql(sql)
    }

    /// A step that runs Swift code, for backfills SQL cannot express. A closure cannot be hashed, so
    /// `fingerprint` stands for its content: change it whenever the code's effect would change, and
    /// the migrator will refuse a database that already ran the old version of the step.
    public init(
        version: Int, name: String, fingerprint: String, body: @escaping @Sendable (Database) throws -> Void
    ) {
        precondition(version >= 1, "Migration step versions start at 1")
        self.version = version
        self.name = name
        self.sql = nil
        self.checksum = Self.digest("closure:" + fingerprint)
        self.redundantIndexes = []
        self.body = .closure(body)
    }

    func run(_ db: Database) throws {
        switch body {
        case .sql(let sql): try db.execute(sql: sql)
        case .closure(let closure): try closure(db)
        }
    }

    private static func digest(_ text: String) -> String {
        SHA256.hash(data: Data(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
            .map { String(format: "%02x", $0) }.joined()
    }
}
