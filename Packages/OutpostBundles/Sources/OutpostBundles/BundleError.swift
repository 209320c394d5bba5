import Foundation
import OutpostSchema

/// Why a bundle was refused, and exactly where: the file, the line and column (XML), the JSON path, the
/// zip entry, and the record's entity, id and field. When an import throws it, the database is unchanged.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct BundleError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure; compare with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case unreadableFile, unknownContainer, malformedXML, malformedJSON, forbiddenConstruct
            case schemaViolation, invalidRecord, duplicateRecord, unsupportedFormatVersion, limitExceeded
            case unsafeArchiveEntry, suspiciousArchive, missingFile, checksumMismatch, databaseFailure
            case notRepresentable, outsideProject
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// The bundle (or a database or output file) could not be opened, read or written.
        public static let unreadableFile = Code(.unreadableFile)
        /// The file is neither XML, JSON nor a zip archive.
        public static let unknownContainer = Code(.unknownContainer)
        /// The XML is not well-formed.
        public static let malformedXML = Code(.malformedXML)
        /// The JSON is not well-formed.
        public static let malformedJSON = Code(.malformedJSON)
        /// A DTD, entity declaration or other construct bundles never use, refused as a possible attack.
        public static let forbiddenConstruct = Code(.forbiddenConstruct)
        /// The document breaks `bundle.xsd` or `bundle.schema.json` (a wrong type, a missing or unknown field).
        public static let schemaViolation = Code(.schemaViolation)
        /// A record breaks a rule of its entity (see `modelError`).
        public static let invalidRecord = Code(.invalidRecord)
        /// Two records of the same entity share an id.
        public static let duplicateRecord = Code(.duplicateRecord)
        /// The bundle's format version is one this build does not read.
        public static let unsupportedFormatVersion = Code(.unsupportedFormatVersion)
        /// A size, depth or count limit of `BundleLimits` was exceeded.
        public static let limitExceeded = Code(.limitExceeded)
        /// A zip entry would land outside the bundle (`../`, an absolute path) or is a symbolic link.
        public static let unsafeArchiveEntry = Code(.unsafeArchiveEntry)
        /// A zip archive that looks like a bomb or lies about its sizes, or is truncated.
        public static let suspiciousArchive = Code(.suspiciousArchive)
        /// A file the manifest lists is not in the archive, or the archive holds no manifest.
        public static let missingFile = Code(.missingFile)
        /// A file's size or SHA-256 differs from what the manifest declares.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// SQLite failed while the import ran; the transaction was rolled back.
        public static let databaseFailure = Code(.databaseFailure)
        /// A stored value cannot be written in the requested encoding (a control character in XML).
        public static let notRepresentable = Code(.notRepresentable)
        /// A record belongs to a project other than the one the bundle's header names (by its own fields,
        /// or as the importing device holds it or a parent it names): `entity` and `id` name it, the
        /// message both projects. A bundle carries one project's records.
        public static let outsideProject = Code(.outsideProject)

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What was found and what was expected, in plain words.
    public var message: String
    /// The bundle file (or database file, for a database failure).
    public var file: String?
    /// The 1-based line in the XML or JSON document.
    public var line: Int?
    /// The 1-based column in the XML or JSON document.
    public var column: Int?
    /// The JSON path of the offending value, such as `$.records[12].fields.title`.
    public var jsonPath: String?
    /// The zip entry concerned.
    public var archiveEntry: String?
    /// The record's entity, when the failure concerns one record.
    public var entity: EntityType?
    /// The record's id, when known.
    public var id: UUID?
    /// The field at fault, when the failure concerns one field.
    public var field: String?
    /// The error that caused this one, when another library or package raised it first (the file
    /// system, ZIPFoundation, SQLite, the catalog's `ModelError`); kept as a value so a caller can
    /// inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; use the location's properties to say where, and `underlying` for the error
    /// that caused it.
    public init(
        _ code: Code, message: String, file: String? = nil, line: Int? = nil, column: Int? = nil,
        jsonPath: String? = nil, archiveEntry: String? = nil, entity: EntityType? = nil, id: UUID? = nil,
        field: String? = nil, underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.jsonPath = jsonPath
        self.archiveEntry = archiveEntry
        self.entity = entity
        self.id = id
        self.field = field
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: BundleError, rhs: BundleError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.file == rhs.file && lhs.line == rhs.line
            && lhs.column == rhs.column && lhs.jsonPath == rhs.jsonPath && lhs.archiveEntry == rhs.archiveEntry
            && lhs.entity == rhs.entity && lhs.id == rhs.id && lhs.field == rhs.field
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(file)
        hasher.combine(line)
        hasher.combine(column)
        hasher.combine(jsonPath)
        hasher.combine(archiveEntry)
        hasher.combine(entity)
        hasher.combine(id)
        hasher.combine(field)
    }

    public var description: String {
        var place: [String] = []
        var head = file ?? ""
        if let archiveEntry { head += head.isEmpty ? archiveEntry : "[\(archiveEntry)]" }
        if let line {
            head += ":\(line)"
            if let column { head += ":\(column)" }
        }
        if !head.isEmpty { place.append(head) }
        if let jsonPath { place.append(jsonPath) }
        if let entity {
            var record = entity.rawValue
            if let id { record += " \(id.uuidString.lowercased())" }
            if let field { record += ", field '\(field)'" }
            place.append(record)
        } else if let field {
            place.append("field '\(field)'")
        }
        let prefix = place.isEmpty ? "" : place.joined(separator: ": ") + ": "
        return prefix + message + " [\(code)]"
    }

    /// The same error, placed at `location` where it does not already say more.
    public func located(_ location: SourceLocation) -> BundleError {
        var copy = self
        copy.file = copy.file ?? location.file
        copy.archiveEntry = copy.archiveEntry ?? location.archiveEntry
        copy.line = copy.line ?? location.line
        copy.column = copy.column ?? location.column
        copy.jsonPath = copy.jsonPath ?? location.jsonPath
        return copy
    }

    /// An invalid-record error from the catalog's own rule check.
    init(_ modelError: ModelError, at location: SourceLocation) {
        self.init(
            .invalidRecord, message: modelError.message + " [\(modelError.code)]", entity: modelError.entity,
            id: modelError.id, field: modelError.field, underlying: modelError)
        self = located(location)
    }
}

/// Where in a bundle something was read: the document (and zip entry), line and column, or JSON path.
public struct SourceLocation: Sendable, Hashable {
    /// The bundle file as the caller named it.
    public var file: String?
    /// The zip entry holding the document, for a zip bundle.
    public var archiveEntry: String?
    /// The line in the document (XML), from 1.
    public var line: Int?
    /// The column in the line (XML), from 1.
    public var column: Int?
    /// The JSON path of the value (JSON), such as `$.records[3]`.
    public var jsonPath: String?

    /// A location; leave out what is not known.
    public init(
        file: String? = nil, archiveEntry: String? = nil, line: Int? = nil, column: Int? = nil, jsonPath: String? = nil
    ) {
        self.file = file
        self.archiveEntry = archiveEntry
        self.line = line
        self.column = column
        self.jsonPath = jsonPath
    }
}
