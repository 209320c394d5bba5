import Foundation

/// A model's catalog fields as key paths, in catalog order: how a model becomes record fields and is
/// built back from them or from stored columns, without `Mirror` (about a tenth of a local write) or
/// `Codable` (15–20 µs a listed row). Each model declares its table once (see `FieldTables.swift`);
/// the table checks it against the catalog when first used, so a missing, extra or mistyped key path
/// stops the program at once instead of writing wrong rows.
public struct FieldTable<Model: Syncable>: @unchecked Sendable {
    // @unchecked: the table holds key paths, which are immutable and shared freely, but not `Sendable`
    // in the standard library's eyes, closures over them, and a `Sendable` model value.

    /// Reads and writes one property as a `FieldValue`.
    struct Accessor {
        let get: (Model) -> FieldValue
        /// False when the value has another kind than the property (the property is left unchanged).
        let set: (inout Model, FieldValue) -> Bool
    }

    let names: [String]
    let accessors: [Accessor]
    let blank: Model

    /// Declares the model's fields, one key path per catalog field, in the catalog's order.
    public init(_ keyPaths: PartialKeyPath<Model>...) {
        let fields = Model.entityType.description.fields
        precondition(
            keyPaths.count == fields.count,
            "\(Model.self).fieldTable lists \(keyPaths.count) key paths, the catalog \(fields.count) fields")
        names = fields.map(\.name)
        accessors = zip(keyPaths, fields).map { keyPath, field in
            guard let accessor = Self.accessor(keyPath, kind: field.kind.storageKind, optional: field.isOptional) else {
                preconditionFailure(
                    "\(Model.self).\(field.name) is listed as \(type(of: keyPath).valueType), which does not hold the catalog's \(field.kind)")
            }
            return accessor
        }
        blank = Self.makeBlank()
    }

    /// A value whose fields are all set before anyone sees it: decoding starts from a copy. Built once,
    /// through the model's `Codable` conformance, from placeholder values of each field's kind.
    private static func makeBlank() -> Model {
        let fields = Model.entityType.description.fields.map { field -> (String, FieldValue) in
            (field.name, field.isOptional ? .null : placeholder(field.kind))
        }
        let record = EntityRecord(
            entity: Model.entityType, id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            fields: Dictionary(uniqueKeysWithValues: fields), sync: SyncMetadata(createdAt: Date(timeIntervalSince1970: 0)))
        do {
            return try Model(from: RecordDecoder(record: record))
        } catch {
            preconditionFailure("\(Model.self) cannot be decoded from placeholder fields: \(error)")
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

    /// The accessor for a property of one of the plain types models use, or a `String`-backed enum.
    private static func accessor(_ keyPath: PartialKeyPath<Model>, kind: String, optional: Bool) -> Accessor? {
        switch (keyPath, kind) {
        case (let path as WritableKeyPath<Model, String>, "text"): plain(path, optional, FieldValue.text, \.text)
        case (let path as WritableKeyPath<Model, String?>, "text"): wrapped(path, FieldValue.text, \.text)
        case (let path as WritableKeyPath<Model, UUID>, "uuid"): plain(path, optional, FieldValue.uuid, \.uuid)
        case (let path as WritableKeyPath<Model, UUID?>, "uuid"): wrapped(path, FieldValue.uuid, \.uuid)
        case (let path as WritableKeyPath<Model, Int>, "integer"): plain(path, optional, { .integer(Int64($0)) }, \.int)
        case (let path as WritableKeyPath<Model, Int?>, "integer"): wrapped(path, { .integer(Int64($0)) }, \.int)
        case (let path as WritableKeyPath<Model, Int64>, "integer"): plain(path, optional, FieldValue.integer, \.integer)
        case (let path as WritableKeyPath<Model, Int64?>, "integer"): wrapped(path, FieldValue.integer, \.integer)
        case (let path as WritableKeyPath<Model, Double>, "real"): plain(path, optional, FieldValue.real, \.real)
        case (let path as WritableKeyPath<Model, Double?>, "real"): wrapped(path, FieldValue.real, \.real)
        case (let path as WritableKeyPath<Model, Bool>, "bool"): plain(path, optional, FieldValue.bool, \.bool)
        case (let path as WritableKeyPath<Model, Bool?>, "bool"): wrapped(path, FieldValue.bool, \.bool)
        case (let path as WritableKeyPath<Model, Date>, "date"): plain(path, optional, FieldValue.date, \.date)
        case (let path as WritableKeyPath<Model, Date?>, "date"): wrapped(path, FieldValue.date, \.date)
        case (let path as WritableKeyPath<Model, Data>, "blob"): plain(path, optional, FieldValue.blob, \.blob)
        case (let path as WritableKeyPath<Model, Data?>, "blob"): wrapped(path, FieldValue.blob, \.blob)
        case (_, "text") where !optional:
            if let choice = type(of: keyPath).valueType as? any RawRepresentable.Type { Self.choice(keyPath, choice) } else { nil }
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
    private static func choice<Choice: RawRepresentable>(_ keyPath: PartialKeyPath<Model>, _: Choice.Type) -> Accessor? {
        guard Choice.RawValue.self == String.self, let path = keyPath as? WritableKeyPath<Model, Choice> else { return nil }
        // The raw value type was checked to be `String` above, so the casts below are identities; as
        // bit casts they skip the dynamic cast a listed row would otherwise pay per choice field.
        return Accessor(
            get: { .text(unsafeBitCast($0[keyPath: path].rawValue, to: String.self)) },
            set: { model, value in
                guard case .text(let text) = value, let choice = Choice(rawValue: unsafeBitCast(text, to: Choice.RawValue.self))
                else { return false }
                model[keyPath: path] = choice
                return true
            })
    }
}

extension Syncable {
    /// Builds a value from its id, its bookkeeping and its catalog fields (`field(i)` is the value of the
    /// catalog's field `i`), without `Codable`: how stores read rows. A value of the wrong kind for its
    /// field, or outside a choice's list, is a `.typeMismatch` naming the field.
    public init(id: UUID, sync: SyncMetadata, field: (Int) throws -> FieldValue) throws {
        let table = Self.fieldTable
        var model = table.blank
        model.id = id
        model.sync = sync
        // Index loops, not `enumerated()`: this runs unspecialized for every listed row, and generic
        // sequence wrappers cost a runtime metadata lookup per step.
        let accessors = table.accessors
        var index = 0
        while index < accessors.count {
            let value = try field(index)
            guard accessors[index].set(&model, value) else {
                throw ModelError(
                    .typeMismatch, entity: Self.entityType, id: id, field: table.names[index],
                    message: "holds \(value.kindName), which \(Self.self).\(table.names[index]) cannot hold")
            }
            index += 1
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
