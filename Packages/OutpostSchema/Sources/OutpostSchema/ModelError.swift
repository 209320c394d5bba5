import Foundation

/// A record or typed model that breaks a rule of the domain, with the entity, id and field it concerns.
///
/// A struct with a code rather than an enum, so new kinds of failure never break a client's `switch`.
public struct ModelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of rule was broken; compare with the static members, such as `.emptyRequiredField`.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case emptyRequiredField, negativeAmount, unknownEnumValue, missingField
            case typeMismatch, unknownField, outOfRange, invalidFormat, inconsistentFields, wrongEntity
            case forbiddenCharacter, valueTooLong, invalidSchema
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// A required text field holds only white space or nothing.
        public static let emptyRequiredField = Code(.emptyRequiredField)
        /// A money amount, quantity or count is below zero.
        public static let negativeAmount = Code(.negativeAmount)
        /// A choice field holds a value its entity does not define.
        public static let unknownEnumValue = Code(.unknownEnumValue)
        /// A non-optional field is absent or null.
        public static let missingField = Code(.missingField)
        /// A field holds a value of the wrong storage kind (text where a number belongs, say).
        public static let typeMismatch = Code(.typeMismatch)
        /// A record carries a field its entity does not define.
        public static let unknownField = Code(.unknownField)
        /// A number lies outside its allowed range (a latitude past 90°, a discount over 100 %).
        public static let outOfRange = Code(.outOfRange)
        /// A text field does not match its format (a day, a SHA-256 digest).
        public static let invalidFormat = Code(.invalidFormat)
        /// Fields that only make sense together disagree (a clock-out without its clock-in).
        public static let inconsistentFields = Code(.inconsistentFields)
        /// A record of one entity was converted to the typed model of another.
        public static let wrongEntity = Code(.wrongEntity)
        /// A text holds a character XML 1.0 cannot carry (a control character such as U+0001), which
        /// would make every XML bundle of the record's project unwritable.
        public static let forbiddenCharacter = Code(.forbiddenCharacter)
        /// A text is longer than a bundle carries (`EntityRecord.maximumTextBytes` in UTF-8).
        public static let valueTooLong = Code(.valueTooLong)
        /// An app's schema declaration is inconsistent (`AppSchema`): refused when made.
        public static let invalidSchema = Code(.invalidSchema)

        public var description: String { wrapped.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The entity type whose rule was broken.
    public var entity: EntityType
    /// The record's id, when one is known.
    public var id: UUID?
    /// The field at fault, when the failure concerns one field.
    public var field: String?
    /// A readable explanation of what is wrong and what was expected.
    public var message: String
    /// The error that caused this one, when another library or package raised it first (a decoder's
    /// error, say); kept as a value so a caller can inspect it, beside its text in `message`.
    public var underlying: (any Error & Sendable)?

    /// Creates an error; `message` should say what was found and what was expected, and `underlying`
    /// is the error that caused it, if any.
    public init(
        _ code: Code, entity: EntityType, id: UUID? = nil, field: String? = nil, message: String,
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
    public static func == (lhs: ModelError, rhs: ModelError) -> Bool {
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
        var place = entity.rawValue
        if let id { place += " \(id.uuidString.lowercased())" }
        if let field { place += ", field '\(field)'" }
        return "\(place): \(message) [\(code)]"
    }
}
