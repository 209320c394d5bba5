import Foundation

/// A model's catalog fields as key paths, in catalog order: how a model becomes record fields and is
/// built back from them or from stored columns, without `Mirror` (about a tenth of a local write) or
/// `Codable` (15–20 µs a listed row). Each model declares its table once (see `FieldTables.swift`);
/// the table checks it against the catalog when first used, so a missing, extra or mistyped key path
/// stops the program at once instead of writing wrong rows.
public final class FieldTable<Model: Syncable>: @unchecked Sendable {
    // @unchecked: the table holds key paths, which are immutable and shared freely, but not `Sendable`
    // in the standard library's eyes, closures over them, and a `Sendable` model value; all `let`s.
    // A class: reading `Model.fieldTable` for each decoded row is then one retain, where a struct was
    // copied field by field through its generic type's witnesses.

    /// Reads and writes one property as a `FieldValue`.
    struct Accessor {
        let get: (Model) -> FieldValue
        /// False when the value has another kind than the property (the property is left unchanged).
        let set: (inout Model, FieldValue) -> Bool
    }

    let names: [String]
    let accessors: [Accessor]
    /// Where each field is stored in the model, when every field is a stored property: decoding then
    /// writes each value in place (see `Slot`). Nil when a field is computed; decoding uses the accessors.
    let slots: [Slot]?
    private let blankValue: Model?
    /// What is wrong with the table against the schema's declaration (a missing, extra or mistyped key
    /// path), naming the field; nil when it matches. Installing a schema checks every model's table
    /// (`EntityCatalog.install`) and refuses the schema with this, so a wrong model stops the app at
    /// start with an error, never a wrong row.
    let problem: (field: String?, message: String)?

    /// A value whose fields are all set before anyone sees it: decoding starts from a copy.
    var blank: Model {
        guard let blankValue else { preconditionFailure("\(Model.self).fieldTable: \(problem?.message ?? "")") }
        return blankValue
    }

    /// Declares the model's fields, one key path per catalog field, in the catalog's order.
    public init(_ keyPaths: PartialKeyPath<Model>...) {
        let fields = Model.entityType.description.fields
        names = fields.map(\.name)
        guard keyPaths.count == fields.count else {
            (accessors, slots, blankValue) = ([], nil, nil)
            problem = (nil, "\(Model.self).fieldTable lists \(keyPaths.count) key paths, the schema \(fields.count) fields")
            return
        }
        var pairs: [(Accessor, Slot?)] = []
        for (keyPath, field) in zip(keyPaths, fields) {
            guard let pair = Self.accessor(keyPath, kind: field.kind, optional: field.isOptional) else {
                (accessors, slots, blankValue) = ([], nil, nil)
                problem = (field.name, "\(Model.self).\(field.name) is listed as \(type(of: keyPath).valueType), which does not hold the schema's \(field.isOptional ? "optional " : "")\(field.kind)")
                return
            }
            pairs.append((pair.accessor, MemoryLayout<Model>.offset(of: keyPath).map { Slot(offset: $0, kind: pair.slot) }))
        }
        accessors = pairs.map(\.0)
        let slots = pairs.compactMap(\.1)
        self.slots = slots.count == pairs.count ? slots : nil
        switch Self.makeBlank() {
        case .success(let value): (blankValue, problem) = (value, nil)
        case .failure(let message): (blankValue, problem) = (nil, (nil, message))
        }
    }

    private enum Blank { case success(Model), failure(String) }

    /// A value whose fields are all set, built once through the model's `Codable` conformance from
    /// placeholder values of each field's kind.
    private static func makeBlank() -> Blank {
        let fields = Model.entityType.description.fields.map { field -> (String, FieldValue) in
            (field.name, field.isOptional ? .null : placeholder(field.kind))
        }
        let record = EntityRecord(
            entity: Model.entityType, id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            fields: Dictionary(uniqueKeysWithValues: fields), sync: SyncMetadata(createdAt: Date(timeIntervalSince1970: 0)))
        do {
            return .success(try Model(from: RecordDecoder(record: record)))
        } catch {
            return .failure("\(Model.self) cannot be decoded from placeholder fields: \(error)")
        }
    }

    private static func placeholder(_ kind: FieldKind) -> FieldValue {
        switch kind {
        case .text, .day, .sha256: .text("")
        case .choice(let allowed): .text(allowed.first ?? "")
        case .integer, .money, .count: .integer(0)
        case .real, .quantity: .real(0)
        case .bool: .bool(false)
        case .date: .date(Date(timeIntervalSince1970: 0))
        case .uuid: .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .blob: .blob(Data())
        }
    }

    /// The accessor for a property of one of the plain types models use, or a `String`-backed enum,
    /// with the kind of slot that holds it.
    private static func accessor(_ keyPath: PartialKeyPath<Model>, kind: FieldKind, optional: Bool) -> (accessor: Accessor, slot: Slot.Kind)? {
        func with(_ accessor: Accessor?, _ slot: Slot.Kind) -> (accessor: Accessor, slot: Slot.Kind)? { accessor.map { ($0, slot) } }
        return switch (keyPath, kind.storageKind) {
        case (let path as WritableKeyPath<Model, String>, "text"): with(plain(path, optional, FieldValue.text, \.text), .text)
        case (let path as WritableKeyPath<Model, String?>, "text"): with(wrapped(path, FieldValue.text, \.text), .optionalText)
        case (let path as WritableKeyPath<Model, UUID>, "uuid"): with(plain(path, optional, FieldValue.uuid, \.uuid), .uuid)
        case (let path as WritableKeyPath<Model, UUID?>, "uuid"): with(wrapped(path, FieldValue.uuid, \.uuid), .optionalUUID)
        case (let path as WritableKeyPath<Model, Int>, "integer"): with(plain(path, optional, { .integer(Int64($0)) }, \.int), .int)
        case (let path as WritableKeyPath<Model, Int?>, "integer"): with(wrapped(path, { .integer(Int64($0)) }, \.int), .optionalInt)
        case (let path as WritableKeyPath<Model, Int64>, "integer"): with(plain(path, optional, FieldValue.integer, \.integer), .int64)
        case (let path as WritableKeyPath<Model, Int64?>, "integer"): with(wrapped(path, FieldValue.integer, \.integer), .optionalInt64)
        case (let path as WritableKeyPath<Model, Double>, "real"): with(plain(path, optional, FieldValue.real, \.real), .real)
        case (let path as WritableKeyPath<Model, Double?>, "real"): with(wrapped(path, FieldValue.real, \.real), .optionalReal)
        case (let path as WritableKeyPath<Model, Bool>, "bool"): with(plain(path, optional, FieldValue.bool, \.bool), .bool)
        case (let path as WritableKeyPath<Model, Bool?>, "bool"): with(wrapped(path, FieldValue.bool, \.bool), .optionalBool)
        case (let path as WritableKeyPath<Model, Date>, "date"): with(plain(path, optional, FieldValue.date, \.date), .date)
        case (let path as WritableKeyPath<Model, Date?>, "date"): with(wrapped(path, FieldValue.date, \.date), .optionalDate)
        case (let path as WritableKeyPath<Model, Data>, "blob"): with(plain(path, optional, FieldValue.blob, \.blob), .blob)
        case (let path as WritableKeyPath<Model, Data?>, "blob"): with(wrapped(path, FieldValue.blob, \.blob), .optionalBlob)
        case (_, "text") where !optional:
            if case .choice(let allowed) = kind, let choice = type(of: keyPath).valueType as? any RawRepresentable.Type {
                Self.choice(keyPath, choice, allowed: allowed)
            } else {
                nil
            }
        default: nil
        }
    }

    private static func plain<Value>(
        _ path: WritableKeyPath<Model, Value>, _ optional: Bool, _ wrap: @escaping (Value) -> FieldValue,
        _ unwrap: @escaping (FieldValue) -> Value?
    ) -> Accessor? {
        guard !optional else { return nil }
        return Accessor(
            get: { wrap($0[keyPath: path]) },
            set: { model, value in
                guard let unwrapped = unwrap(value) else { return false }
                model[keyPath: path] = unwrapped
                return true
            })
    }

    private static func wrapped<Value>(
        _ path: WritableKeyPath<Model, Value?>, _ wrap: @escaping (Value) -> FieldValue, _ unwrap: @escaping (FieldValue) -> Value?
    ) -> Accessor {
        Accessor(
            get: { $0[keyPath: path].map(wrap) ?? .null },
            set: { model, value in
                if case .null = value {
                    model[keyPath: path] = nil
                    return true
                }
                guard let unwrapped = unwrap(value) else { return false }
                model[keyPath: path] = unwrapped
                return true
            })
    }

    /// A `String`-backed enum (a choice field), read and written through its raw value.
    private static func choice<Choice: RawRepresentable>(_ keyPath: PartialKeyPath<Model>, _: Choice.Type, allowed: [String])
        -> (accessor: Accessor, slot: Slot.Kind)?
    {
        guard Choice.RawValue.self == String.self, let path = keyPath as? WritableKeyPath<Model, Choice> else { return nil }
        // The raw value type was checked to be `String` above, so the casts below are identities; as
        // bit casts they skip the dynamic cast a value would otherwise pay.
        let accessor = Accessor(
            get: { .text(unsafeBitCast($0[keyPath: path].rawValue, to: String.self)) },
            set: { model, value in
                guard case .text(let text) = value, let choice = Choice(rawValue: unsafeBitCast(text, to: Choice.RawValue.self))
                else { return false }
                model[keyPath: path] = choice
                return true
            })
        let cases = allowed.compactMap { text in Choice(rawValue: unsafeBitCast(text, to: Choice.RawValue.self)).map { (text, $0) } }
        return (accessor, .choice(ChoiceSlot(cases)))
    }
}

/// Where one field lives inside the model's value (`MemoryLayout.offset(of:)` of its stored property)
/// and what type it has there. Decoding a listed row writes each value straight to its place: through
/// key paths and the generic accessors, unspecialized as the store runs them, a row cost a runtime
/// metadata lookup and a key-path walk per field, two thirds of listing 10,000 issues.
struct Slot: Sendable {
    enum Kind: Sendable {
        case text, optionalText, uuid, optionalUUID, int, optionalInt, int64, optionalInt64
        case real, optionalReal, bool, optionalBool, date, optionalDate, blob, optionalBlob
        case choice(AnyChoiceSlot)
    }

    let offset: Int
    let kind: Kind

    /// Writes `value` into the model whose bytes start at `base`; false (and nothing written) when the
    /// value has another kind than the property, as the accessors' `set` does.
    func store(_ value: FieldValue, in base: UnsafeMutableRawPointer) -> Bool {
        let address = base + offset
        switch (kind, value) {
        case (.text, .text(let text)): address.assumingMemoryBound(to: String.self).pointee = text
        case (.optionalText, .text(let text)): address.assumingMemoryBound(to: String?.self).pointee = text
        case (.optionalText, .null): address.assumingMemoryBound(to: String?.self).pointee = nil
        case (.uuid, .uuid(let id)): address.assumingMemoryBound(to: UUID.self).pointee = id
        case (.optionalUUID, .uuid(let id)): address.assumingMemoryBound(to: UUID?.self).pointee = id
        case (.optionalUUID, .null): address.assumingMemoryBound(to: UUID?.self).pointee = nil
        case (.int, .integer(let number)):
            guard let number = Int(exactly: number) else { return false }
            address.assumingMemoryBound(to: Int.self).pointee = number
        case (.optionalInt, .integer(let number)):
            guard let number = Int(exactly: number) else { return false }
            address.assumingMemoryBound(to: Int?.self).pointee = number
        case (.optionalInt, .null): address.assumingMemoryBound(to: Int?.self).pointee = nil
        case (.int64, .integer(let number)): address.assumingMemoryBound(to: Int64.self).pointee = number
        case (.optionalInt64, .integer(let number)): address.assumingMemoryBound(to: Int64?.self).pointee = number
        case (.optionalInt64, .null): address.assumingMemoryBound(to: Int64?.self).pointee = nil
        case (.real, .real(let number)): address.assumingMemoryBound(to: Double.self).pointee = number
        case (.optionalReal, .real(let number)): address.assumingMemoryBound(to: Double?.self).pointee = number
        case (.optionalReal, .null): address.assumingMemoryBound(to: Double?.self).pointee = nil
        case (.bool, .bool(let flag)): address.assumingMemoryBound(to: Bool.self).pointee = flag
        case (.optionalBool, .bool(let flag)): address.assumingMemoryBound(to: Bool?.self).pointee = flag
        case (.optionalBool, .null): address.assumingMemoryBound(to: Bool?.self).pointee = nil
        case (.date, .date(let date)): address.assumingMemoryBound(to: Date.self).pointee = date
        case (.optionalDate, .date(let date)): address.assumingMemoryBound(to: Date?.self).pointee = date
        case (.optionalDate, .null): address.assumingMemoryBound(to: Date?.self).pointee = nil
        case (.blob, .blob(let data)): address.assumingMemoryBound(to: Data.self).pointee = data
        case (.optionalBlob, .blob(let data)): address.assumingMemoryBound(to: Data?.self).pointee = data
        case (.optionalBlob, .null): address.assumingMemoryBound(to: Data?.self).pointee = nil
        case (.choice(let choice), .text(let text)): return choice.store(text, at: address)
        default: return false
        }
        return true
    }
}

/// Writes a choice field's value in place. A class so the slot itself is not generic: the enum type is
/// known to the subclass, and decoding a row asks the runtime for no type.
class AnyChoiceSlot: @unchecked Sendable {
    // @unchecked: no stored state; subclasses add none.

    /// Writes the case whose raw value is `text` at `address`; false when no case has it.
    func store(_ text: String, at address: UnsafeMutableRawPointer) -> Bool { false }
}

/// The slot of one choice type. A row's text is matched against the catalog's few allowed values and
/// the case built for it once is copied in: no `init(rawValue:)`, whose optional result is a type the
/// runtime would be asked for on every row.
final class ChoiceSlot<Choice: RawRepresentable>: AnyChoiceSlot, @unchecked Sendable {
    // @unchecked: the cases are written once, in `init`, and only read after.
    private let rawValues: [String]
    private let cases: UnsafeMutablePointer<Choice>

    init(_ pairs: [(String, Choice)]) {
        rawValues = pairs.map(\.0)
        cases = .allocate(capacity: max(pairs.count, 1))
        for (index, pair) in pairs.enumerated() { (cases + index).initialize(to: pair.1) }
    }

    deinit {
        cases.deinitialize(count: rawValues.count)
        cases.deallocate()
    }

    override func store(_ text: String, at address: UnsafeMutableRawPointer) -> Bool {
        var index = 0
        while index < rawValues.count {
            if rawValues[index] == text {
                address.assumingMemoryBound(to: Choice.self).update(from: cases + index, count: 1)
                return true
            }
            index += 1
        }
        return false
    }
}

extension Syncable {
    /// Builds a value from its id, its bookkeeping and its catalog fields (`field(i)` is the value of the
    /// catalog's field `i`), without `Codable`: how stores read rows. A value of the wrong kind for its
    /// field, or outside a choice's list, is a `.typeMismatch` naming the field.
    public init(id: UUID, sync: SyncMetadata, field: (Int) throws -> FieldValue) throws {
        try self.init(id: id, sync: sync, inPlace: true, field: field)
    }

    /// The same, with `inPlace` false forcing the accessors (the path of a model with a computed field),
    /// so tests can hold both paths to the same results.
    init(id: UUID, sync: SyncMetadata, inPlace: Bool, field: (Int) throws -> FieldValue) throws {
        let table = Self.fieldTable
        var model = table.blank
        model.id = id
        model.sync = sync
        // Index loops, not `enumerated()`: this runs unspecialized for every listed row, and generic
        // sequence wrappers cost a runtime metadata lookup per step.
        var failed: (index: Int, value: FieldValue)?
        if inPlace, let slots = table.slots {
            try withUnsafeMutableBytes(of: &model) { bytes in
                guard let base = bytes.baseAddress else { return }
                var index = 0
                while index < slots.count {
                    let value = try field(index)
                    guard slots[index].store(value, in: base) else {
                        failed = (index, value)
                        return
                    }
                    index += 1
                }
            }
        } else {
            let accessors = table.accessors
            var index = 0
            while index < accessors.count, failed == nil {
                let value = try field(index)
                if !accessors[index].set(&model, value) { failed = (index, value) }
                index += 1
            }
        }
        if let (index, value) = failed {
            throw ModelError(
                .typeMismatch, entity: Self.entityType, id: id, field: table.names[index],
                message: "holds \(value.kindName), which \(Self.self).\(table.names[index]) cannot hold")
        }
        self = model
    }

    /// The catalog fields by name, read through the field table.
    var catalogFields: [String: FieldValue] {
        let table = Self.fieldTable
        var fields = [String: FieldValue](minimumCapacity: table.names.count)
        let accessors = table.accessors
        var index = 0
        while index < accessors.count {
            fields[table.names[index]] = accessors[index].get(self)
            index += 1
        }
        return fields
    }
}

extension FieldValue {
    fileprivate var text: String? { if case .text(let value) = self { value } else { nil } }
    fileprivate var uuid: UUID? { if case .uuid(let value) = self { value } else { nil } }
    fileprivate var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    fileprivate var int: Int? { if case .integer(let value) = self { Int(exactly: value) } else { nil } }
    fileprivate var real: Double? { if case .real(let value) = self { value } else { nil } }
    fileprivate var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    fileprivate var date: Date? { if case .date(let value) = self { value } else { nil } }
    fileprivate var blob: Data? { if case .blob(let value) = self { value } else { nil } }
}
