import Foundation
import OutpostModels

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

    /// Creates an error; `message` should say what was found and what was expected.
    public init(_ code: Code, entity: EntityType? = nil, id: UUID? = nil, field: String? = nil, message: String) {
        self.code = code
        self.entity = entity
        self.id = id
        self.field = field
        self.message = message
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
