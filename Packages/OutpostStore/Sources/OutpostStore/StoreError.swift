import OutpostMigrator
import OutpostModels

/// Why the store could not do what was asked, with the database file and, for a refused migration,
/// the migrator's own error.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong; compare with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case databaseNotFound, migrationRefused, databaseFailure, invalidRecord, conflictNotFound
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// No database file at the given path (reads never create one).
        public static let databaseNotFound = Code(.databaseNotFound)
        /// The migrator refused or failed; see `migrationError`.
        public static let migrationRefused = Code(.migrationRefused)
        /// SQLite could not open or read the file.
        public static let databaseFailure = Code(.databaseFailure)
        /// A write broke a rule of the domain; see `modelError`. Nothing was written.
        public static let invalidRecord = Code(.invalidRecord)
        /// No open conflict has the given number.
        public static let conflictNotFound = Code(.conflictNotFound)

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

    /// Creates an error.
    public init(
        _ code: Code, path: String, message: String, migrationError: MigrationError? = nil, modelError: ModelError? = nil
    ) {
        self.code = code
        self.path = path
        self.message = message
        self.migrationError = migrationError
        self.modelError = modelError
    }

    public var description: String {
        if let migrationError { return migrationError.description }
        return "\(path): \(message) [\(code)]"
    }
}

extension StoreError {
    /// Runs `body`, letting a `StoreError` through and reporting anything else (SQLite, a record that
    /// no longer decodes) as a database failure of the file at `path`.
    static func mapping<T>(path: String, _ body: () throws -> T) throws(StoreError) -> T {
        do {
            return try body()
        } catch let error as StoreError {
            throw error
        } catch let error as ModelError {
            throw StoreError(.invalidRecord, path: path, message: error.description, modelError: error)
        } catch {
            throw StoreError(.databaseFailure, path: path, message: "\(error)")
        }
    }

    /// The asynchronous form of `mapping(path:_:)`.
    static func mapping<T: Sendable>(path: String, _ body: () async throws -> T) async throws(StoreError) -> T {
        do {
            return try await body()
        } catch let error as StoreError {
            throw error
        } catch let error as ModelError {
            throw StoreError(.invalidRecord, path: path, message: error.description, modelError: error)
        } catch {
            throw StoreError(.databaseFailure, path: path, message: "\(error)")
        }
    }
}
