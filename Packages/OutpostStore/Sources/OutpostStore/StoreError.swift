import GRDB
import OutpostMigrator
import OutpostSchema

/// Why the store could not do what was asked, with the database file and, for a refused migration,
/// the migrator's own error.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong; compare with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case databaseNotFound, migrationRefused, databaseFailure, databaseBusy, invalidRecord, conflictNotFound
            case schemaMismatch, foreignDatabase, mediaNotFound, checksumMismatch, overBudget, storageFull, recordNotHeld
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// No database file at the given path (reads never create one).
        public static let databaseNotFound = Code(.databaseNotFound)
        /// The migrator refused or failed; see `migrationError`.
        public static let migrationRefused = Code(.migrationRefused)
        /// SQLite could not open or read the file.
        public static let databaseFailure = Code(.databaseFailure)
        /// Another connection (another process on the file: a pull, an import) held the write lock for
        /// longer than the store waits (`LocalStore.open(busyTimeout:)`). Nothing was written, and
        /// nothing the caller gave was consumed (an `attach`'s file stays where it was): try again.
        public static let databaseBusy = Code(.databaseBusy)
        /// A write broke a rule of the domain; see `modelError`. Nothing was written.
        public static let invalidRecord = Code(.invalidRecord)
        /// No open conflict has the given number.
        public static let conflictNotFound = Code(.conflictNotFound)
        /// The database's tables lack a column a declared field needs, or hold it with another type;
        /// `modelError` names the entity and field. A migration step is missing.
        public static let schemaMismatch = Code(.schemaMismatch)
        /// The file belongs to another app, or to no Outpost app; nothing was changed.
        public static let foreignDatabase = Code(.foreignDatabase)
        /// No media record of that id on this device (or a deleted one, or one not yet given a file):
        /// there is no original to read.
        public static let mediaNotFound = Code(.mediaNotFound)
        /// A downloaded original is not the file its record names (its SHA-256 differs); it was removed,
        /// and the next request downloads it again from the start.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// An original larger than the cache budget the app set: it is not downloaded at all, so a record
        /// that claims a huge size cannot fill the device.
        public static let overBudget = Code(.overBudget)
        /// The device's volume holds less free space than the store keeps for the user's own writes
        /// (`LocalStore.open(at:app:synchronous:busyTimeout:keepingFree:)`): a pulled page was not
        /// applied and nothing changed. Free some space and sync again.
        public static let storageFull = Code(.storageFull)

        /// The record a call needs is not on this device (removed since: a rebuild after a server restore
        /// found the server without it); nothing was changed.
        public static let recordNotHeld = Code(.recordNotHeld)

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The database file.
    public var path: String
    /// What happened, in plain words.
    public var message: String
    /// The migrator's error, when the failure came from a migration.
    public var migrationError: MigrationError?
    /// The broken rule, when a write was refused as invalid.
    public var modelError: ModelError?
    /// The error that caused this one, when another library or package raised it first (GRDB's
    /// `DatabaseError`, the migrator's or the catalog's error, the file system); kept as a value so a
    /// caller can inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `underlying` is the error that caused it, if any.
    public init(
        _ code: Code, path: String, message: String, migrationError: MigrationError? = nil, modelError: ModelError? = nil,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.path = path
        self.message = message
        self.migrationError = migrationError
        self.modelError = modelError
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: StoreError, rhs: StoreError) -> Bool {
        lhs.code == rhs.code && lhs.path == rhs.path && lhs.message == rhs.message
            && lhs.migrationError == rhs.migrationError && lhs.modelError == rhs.modelError
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(path)
        hasher.combine(message)
        hasher.combine(migrationError)
        hasher.combine(modelError)
    }

    public var description: String {
        if let migrationError { return migrationError.description }
        return "\(path): \(message) [\(code)]"
    }
}

extension StoreError {
    /// A SQLite or other failure of the file at `path`: `databaseBusy` when another connection's write
    /// outlasted the busy timeout, else `databaseFailure`.
    init(failure error: any Error, path: String) {
        if let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            self.init(
                .databaseBusy, path: path,
                message: "another process kept the database busy for longer than this store waits; nothing was written, try again (\(error))",
                underlying: error)
        } else {
            self.init(.databaseFailure, path: path, message: "\(error)", underlying: error)
        }
    }

    /// Runs `body`, letting a `StoreError` through and reporting anything else (SQLite, a record that
    /// no longer decodes) as a database failure of the file at `path`.
    static func mapping<T>(path: String, _ body: () throws -> T) throws(StoreError) -> T {
        do {
            return try body()
        } catch var error as StoreError {
            // Raised where the file is not known (a queue row's reader): named by the store that read it.
            if error.path.isEmpty { error.path = path }
            throw error
        } catch let error as ModelError {
            throw StoreError(.invalidRecord, path: path, message: error.description, modelError: error, underlying: error)
        } catch {
            throw StoreError(failure: error, path: path)
        }
    }

    /// The asynchronous form of `mapping(path:_:)`.
    static func mapping<T: Sendable>(path: String, _ body: () async throws -> T) async throws(StoreError) -> T {
        do {
            return try await body()
        } catch var error as StoreError {
            // Raised where the file is not known (a queue row's reader): named by the store that read it.
            if error.path.isEmpty { error.path = path }
            throw error
        } catch let error as ModelError {
            throw StoreError(.invalidRecord, path: path, message: error.description, modelError: error, underlying: error)
        } catch {
            throw StoreError(failure: error, path: path)
        }
    }
}
