import Foundation
import OutpostSchema

/// A clock or record the conflict code cannot accept, with the entity, id and field it concerns.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct ConflictError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong; compare with the static members, such as `.clockDrift`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case clockDrift, invalidClockEncoding, mismatchedRecords, missingClock
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// A received clock runs further ahead of local time than the clock's bound allows, so it was refused.
        public static let clockDrift = Code(.clockDrift)
        /// Text that is not a hybrid timestamp's encoding.
        public static let invalidClockEncoding = Code(.invalidClockEncoding)
        /// The two versions given to a strategy are not of the same entity and id.
        public static let mismatchedRecords = Code(.mismatchedRecords)
        /// A field has a value but no clock, or a clock but no value.
        public static let missingClock = Code(.missingClock)

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The entity type concerned, when a record is.
    public var entity: EntityType?
    /// The record's id, when a record is concerned.
    public var id: UUID?
    /// The field at fault, when the failure concerns one field.
    public var field: String?
    /// A readable explanation of what was found and what was expected.
    public var message: String
    /// The error that caused this one, when another library or package raised it first; kept as a
    /// value so a caller can inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `message` should say what was found and what was expected, and `underlying`
    /// is the error that caused it, if any.
    public init(
        _ code: Code, entity: EntityType? = nil, id: UUID? = nil, field: String? = nil, message: String,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.entity = entity
        self.id = id
        self.field = field
        self.message = message
        self.underlying = underlying
    }

    // Written by hand to leave `underlying` out: a cause is often not Equatable (`any Error` never is),
    // and two errors with the same code, message and place are the same failure to a caller.
    public static func == (lhs: ConflictError, rhs: ConflictError) -> Bool {
        lhs.code == rhs.code && lhs.entity == rhs.entity && lhs.id == rhs.id && lhs.field == rhs.field
            && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(entity)
        hasher.combine(id)
        hasher.combine(field)
        hasher.combine(message)
    }

    public var description: String {
        var place: [String] = []
        if let entity { place.append(entity.rawValue) }
        if let id { place.append(id.uuidString.lowercased()) }
        var text = place.joined(separator: " ")
        if let field { text += text.isEmpty ? "field '\(field)'" : ", field '\(field)'" }
        return (text.isEmpty ? "" : text + ": ") + "\(message) [\(code)]"
    }
}
