import Foundation

/// The generic form of any entity: what the store, the queue, the wire and the conflict strategies
/// work on, so none of them needs a case per type.
public struct EntityRecord: Sendable, Hashable, Codable {
    /// Which entity this is.
    public var entity: EntityType
    /// The client-generated id.
    public var id: UUID
    /// The domain fields by name; a field absent here reads as `.null`.
    public var fields: [String: FieldValue]
    /// Sync bookkeeping.
    public var sync: SyncMetadata

    /// Creates a record; `fields` should hold the catalog's fields for `entity`.
    public init(entity: EntityType, id: UUID, fields: [String: FieldValue], sync: SyncMetadata) {
        self.entity = entity
        self.id = id
        self.fields = fields
        self.sync = sync
    }

    /// The value of `field`, `.null` when absent.
    public subscript(field: String) -> FieldValue {
        get { fields[field] ?? .null }
        set { fields[field] = newValue }
    }

    /// Every rule the record breaks: shape first (missing, unknown or mistyped fields, unknown choices),
    /// then field rules (empty text, negative amounts, formats), then the entity's own rules.
    public var validationErrors: [ModelError] {
        let description = entity.description
        var (shape, broken) = fieldErrors(of: description, withRules: true)
        if !shape.isEmpty { return shape }
        for rule in description.rules {
            if let problem = rule(self) { broken.append(problem) }
        }
        return broken
    }

    /// Throws the first rule the record breaks.
    public func validate() throws(ModelError) {
        if let first = validationErrors.first { throw first }
    }

    /// Errors that make a typed conversion impossible (unknown or missing fields, values of the wrong
    /// kind or outside a choice): what a store refuses even from the server, which may skip other rules.
    public func shapeErrors() -> [ModelError] {
        fieldErrors(of: entity.description, withRules: false).shape
    }

    /// The shape errors (unknown fields first, then by catalog field), and with `withRules` the field rules
    /// broken while the shape held, in one pass with one lookup per catalog field; a name it did not visit
    /// is unknown. Every pulled record's shape and every imported record's rules are checked here: a pass
    /// for each was a tenth of an XML import's reading thread (`perf`, stop 94).
    private func fieldErrors(of description: EntityDescription, withRules: Bool) -> (shape: [ModelError], broken: [ModelError]) {
        var shape: [ModelError] = []
        var broken: [ModelError] = []
        var known = 0
        for field in description.fields {
            let stored = fields[field.name]
            if stored != nil { known += 1 }
            let value = stored ?? .null
            if let problem = shapeError(of: field, value) {
                shape.append(problem)
            } else if withRules, shape.isEmpty, let problem = fieldError(field, value) {
                broken.append(problem)
            }
        }
        if known < fields.count { shape.insert(contentsOf: unknownFieldErrors(description), at: 0) }
        return (shape, broken)
    }

    /// What makes `value` unfit for `field`'s kind, if anything: missing when required, of another kind,
    /// or outside the field's choices.
    private func shapeError(of field: FieldDescription, _ value: FieldValue) -> ModelError? {
        if case .null = value {
            return field.isOptional ? nil : error(.missingField, field.name, "is required")
        }
        guard field.kind.holds(value) else {
            return error(.typeMismatch, field.name, "holds \(value.kindName), expected \(field.kind.storageKind)")
        }
        if case .choice(let allowed) = field.kind, case .text(let text) = value, !allowed.contains(text) {
            return error(.unknownEnumValue, field.name, "'\(text)' is not one of \(allowed.joined(separator: ", "))")
        }
        return nil
    }

    /// The record's fields its entity does not have, by name.
    private func unknownFieldErrors(_ description: EntityDescription) -> [ModelError] {
        fields.keys.sorted().filter { description.field(named: $0) == nil }.map {
            error(.unknownField, $0, "is not a field of \(entity.rawValue)")
        }
    }

    private func fieldError(_ field: FieldDescription, _ value: FieldValue) -> ModelError? {
        switch (field.kind, value) {
        case (_, .text(let text)) where field.isRequiredText && text.isBlank:
            return error(.emptyRequiredField, field.name, "must not be empty")
        case (.money, .integer(let amount)), (.count, .integer(let amount)):
            return amount < 0 ? error(.negativeAmount, field.name, "is \(amount), must not be negative") : nil
        case (.quantity, .real(let amount)):
            guard amount.isFinite else { return error(.outOfRange, field.name, "is \(amount), must be finite") }
            return amount < 0 ? error(.negativeAmount, field.name, "is \(amount), must not be negative") : nil
        case (.real, .real(let number)):
            return number.isFinite ? nil : error(.outOfRange, field.name, "is \(number), must be finite")
        case (.day, .text(let day)):
            return Day.isValid(day) ? nil : error(.invalidFormat, field.name, "'\(day)' is not a day (YYYY-MM-DD)")
        case (.sha256, .text(let digest)):
            return Digest.isSHA256Hex(digest)
                ? nil : error(.invalidFormat, field.name, "is not 64 lowercase hex digits")
        default:
            return nil
        }
    }

    /// The longest text a field may hold, in UTF-8 bytes: what a bundle carries (its readers refuse a
    /// longer string, `BundleLimits.maximumStringBytes`, and the XSD's `maxLength`). A longer value would
    /// make every pre-sync bundle of its project fail to import.
    public static let maximumTextBytes = 1 << 20

    /// The first of `fields` whose text no bundle can carry, as an error: a character XML 1.0 cannot
    /// carry (`forbiddenCharacter`), or more than `maximumTextBytes` bytes (`valueTooLong`). Checked on
    /// what a write changes, not in `validationErrors`: a record stored before a rule must stay editable
    /// and deletable until someone fixes it.
    public func unbundlableValueError(in fields: some Sequence<String>) -> ModelError? {
        for name in fields {
            guard case .text(let text) = self[name] else { continue }
            if text.utf8.count > Self.maximumTextBytes {
                return error(
                    .valueTooLong, name,
                    "has \(text.utf8.count) bytes; a text may have at most \(Self.maximumTextBytes) (what a bundle carries)")
            }
            guard let scalar = Self.firstCharacterXMLCannotCarry(in: text) else { continue }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            return error(.forbiddenCharacter, name, "contains \(code), a control character no bundle can carry; remove it")
        }
        return nil
    }

    /// The first scalar outside XML 1.0's characters: C0 controls but tab, line feed and carriage
    /// return, and U+FFFE and U+FFFF. Read byte by byte, since nearly every text has none.
    static func firstCharacterXMLCannotCarry(in text: String) -> Unicode.Scalar? {
        let suspect = text.utf8.contains { byte in
            (byte < 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D) || byte == 0xEF
        }
        guard suspect else { return nil }
        return text.unicodeScalars.first { scalar in
            switch scalar.value {
            case 0x09, 0x0A, 0x0D: false
            case ..<0x20, 0xFFFE, 0xFFFF: true
            default: false
            }
        }
    }

    /// An error about this record: names its entity and id beside `field`, as a rule
    /// (`EntityDescription.Rule`) reports what it found.
    public func error(_ code: ModelError.Code, _ field: String?, _ message: String) -> ModelError {
        ModelError(code, entity: entity, id: id, field: field, message: message)
    }
}

/// Checks for the `day` field kind.
enum Day {
    static func isValid(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard text.utf8.count == 10, parts.count == 3,
            parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            (1...12).contains(month), day >= 1
        else { return false }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        return day <= lengths[month - 1]
    }
}

/// Checks for the `sha256` field kind.
enum Digest {
    static func isSHA256Hex(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

extension String {
    /// Whether the text is empty or only whitespace and newlines, as Foundation's trimming sees them.
    /// The first non-blank ASCII byte settles it at once; trimming every text built a new string per
    /// record and was half the cost of validating a bundle.
    var isBlank: Bool {
        for byte in utf8 {
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D: continue
            case 0..<0x80: return false
            default: return trimmingCharacters(in: .whitespacesAndNewlines).isEmpty  // the rare non-ASCII case
            }
        }
        return true
    }
}

extension EntityRecord {
    /// The bytes of its text and blob values and of its server id, with 16 for each other value: about
    /// what the record holds in memory past its fixed part. What bounds work by bytes as well as by count
    /// where records may be large (a bundle's read-ahead, an import's sort), since one may hold megabytes.
    /// The server id counts as a value does: a bundle may give it a megabyte too, and left out, 400 such
    /// records were read ahead at once, an import at 453 MB (attack 127, F5).
    public var valueBytes: Int {
        fields.values.reduce(sync.serverID?.utf8.count ?? 0) { total, value in
            switch value {
            case .text(let text): total + text.utf8.count + 16
            case .blob(let data): total + data.count + 16
            default: total + 16
            }
        }
    }
}
