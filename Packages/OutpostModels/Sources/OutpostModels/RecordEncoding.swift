import Foundation

/// Typed model → record fields, by reflection over the stored properties. Models are flat structs of
/// a few plain types, so reading properties by name replaces sixteen hand-written conversions.
enum RecordEncoding {
    /// Properties every model has that are not domain fields.
    static let reservedNames: Set<String> = ["id", "sync"]

    static func fields(of model: some Syncable) -> [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        for child in Mirror(reflecting: model).children {
            guard let name = child.label, !reservedNames.contains(name) else { continue }
            fields[name] = value(of: child.value)
        }
        return fields
    }

    static func value(of any: Any) -> FieldValue {
        let mirror = Mirror(reflecting: any)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first else { return .null }
            return value(of: wrapped.value)
        }
        switch any {
        case let value as String: return .text(value)
        case let value as Bool: return .bool(value)
        case let value as Int: return .integer(Int64(value))
        case let value as Int64: return .integer(value)
        case let value as Double: return .real(value)
        case let value as Date: return .date(value)
        case let value as UUID: return .uuid(value)
        case let value as Data: return .blob(value)
        case let value as any RawRepresentable: return Self.value(of: value.rawValue)
        default:
            preconditionFailure("A Syncable model has a property of type \(type(of: any)), which records cannot hold")
        }
    }
}
