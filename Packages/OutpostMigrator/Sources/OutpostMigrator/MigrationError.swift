import Foundation

/// Why a migration did not run, with the step and database it concerns. The database is always left
/// at the last completed version when this is thrown.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct MigrationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong; compare with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case destructiveStep, unsafeColumn, uniqueOnSyncedTable, foreignKeyViolation, stepFailed
            case databaseNewerThanCode, checksumChanged, ledgerDamaged, targetOutOfRange, databaseUnreadable
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// The step dropped, renamed or redefined something, or deleted rows.
        public static let destructiveStep = Code(.destructiveStep)
        /// The step added a NOT NULL column without a default to an existing table.
        public static let unsafeColumn = Code(.unsafeColumn)
        /// The step added a UNIQUE constraint to a synced table, where replays and merges would break it.
        public static let uniqueOnSyncedTable = Code(.uniqueOnSyncedTable)
        /// After the step, a row references a row that does not exist.
        public static let foreignKeyViolation = Code(.foreignKeyViolation)
        /// SQLite (or the closure) failed while the step ran.
        public static let stepFailed = Code(.stepFailed)
        /// The database was migrated by newer code than this; an old app must not touch it.
        public static let databaseNewerThanCode = Code(.databaseNewerThanCode)
        /// A step the database already ran has been edited since.
        public static let checksumChanged = Code(.checksumChanged)
        /// The ledger is not a contiguous run of versions from 1, or lacks a step the database already
        /// ran (a pending step makes a table, index or column the database already has).
        public static let ledgerDamaged = Code(.ledgerDamaged)
        /// `migrate(to:)` was asked for a version below the current one or beyond the last step.
        public static let targetOutOfRange = Code(.targetOutOfRange)
        /// The database could not be opened or read.
        public static let databaseUnreadable = Code(.databaseUnreadable)

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The step concerned, when there is one.
    public var version: Int?
    /// The step's name, when there is one.
    public var stepName: String?
    /// The database file, when known.
    public var path: String?
    /// What was found, in plain words (every removed or changed object, the SQLite message…).
    public var message: String
    /// The error that caused this one, when another library or package raised it first (SQLite's
    /// `DatabaseError`, a step's own error); kept as a value so a caller can inspect it, beside its
    /// text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `underlying` is the error that caused it, if any.
    public init(
        _ code: Code, version: Int? = nil, stepName: String? = nil, path: String? = nil, message: String,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.version = version
        self.stepName = stepName
        self.path = path
        self.message = message
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: MigrationError, rhs: MigrationError) -> Bool {
        lhs.code == rhs.code && lhs.version == rhs.version && lhs.stepName == rhs.stepName && lhs.path == rhs.path
            && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(version)
        hasher.combine(stepName)
        hasher.combine(path)
        hasher.combine(message)
    }

    public var description: String {
        var text = ""
        if let path { text += "\(path): " }
        if let version {
            text += "step \(version)"
            if let stepName { text += " (\(stepName))" }
            text += ": "
        }
        return text + message + " [\(code)]"
    }
}
