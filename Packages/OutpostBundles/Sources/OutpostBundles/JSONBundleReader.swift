import Foundation
import OutpostSchema
import OutpostWire

/// Reads a JSON bundle with bounded memory: the outer object token by token, each record and file
/// reference as one small value, checked against `bundle.schema.json`'s rules with its JSON path.
final class JSONBundleReader: BundleItemReader {
    private let tokenizer: JSONTokenizer
    private let limits: BundleLimits
    private let collecting: Bool
    private let location: SourceLocation
    private var state = State.start
    private var topKeys: Set<String> = []
    private var formatVersion: Int?
    private var projectID: UUID?
    private var asOf: Date?
    private var checkpoints: [String] = []
    private var path = "$"
    private(set) var collectedErrors: [BundleError] = []

    var bytesRead: Int64 { tokenizer.bytesRead }

    init(path: String, displayName: String, archiveEntry: String?, limits: BundleLimits, collecting: Bool,
        arrival: BundleArrival? = nil
    ) throws(BundleError) {
        let input = try DocumentInput(path: path, limit: limits.maximumDocumentBytes, arrival: arrival)
        tokenizer = JSONTokenizer(input: input, limits: limits)
        self.limits = limits
        self.collecting = collecting
        location = SourceLocation(file: displayName, archiveEntry: archiveEntry)
        let base = location
        tokenizer.locate = { [unowned self] error in
            var place = base
            place.jsonPath = self.path
            return error.located(place)
        }
    }

    func next() throws(BundleError) -> BundleItem? {
        do {
            return try step()
        } catch {
            state = .finished
            if collecting, collectedErrors.count < limits.maximumReportedErrors { collectedErrors.append(error) }
            throw error
        }
    }

    private func step() throws(BundleError) -> BundleItem? {
        while true {
            switch state {
            case .start:
                path = "$"
                guard try tokenizer.peekSignificant() == 0x7B else {
                    throw tokenizer.syntaxError("a bundle is a JSON object")
                }
                try tokenizer.expect(0x7B, "'{'")
                state = .members(first: true)
            case .members(let first):
                path = "$"
                if try tokenizer.consume(0x7D) {
                    try tokenizer.expectEnd()
                    state = .finished
                    return try header()
                }
                if !first { try tokenizer.expect(0x2C, "',' or '}'") }
                let key = try tokenizer.readString()
                try tokenizer.expect(0x3A, "':' after a key")
                guard topKeys.insert(key).inserted else {
                    throw tokenizer.syntaxError("the key '\(key)' appears twice in the bundle object")
                }
                path = "$.\(key)"
                state = .members(first: false)
                try member(key)
            case .array(let key, let index):
                path = "$.\(key)"
                if index == 0 {
                    if try tokenizer.consume(0x5D) {
                        state = .members(first: false)
                        continue
                    }
                } else {
                    if try tokenizer.consume(0x5D) {
                        state = .members(first: false)
                        continue
                    }
                    try tokenizer.expect(0x2C, "',' or ']'")
                }
                state = .array(key, index + 1)
                path = "$.\(key)[\(index)]"
                var place = location
                _ = try tokenizer.peekSignificant()
                place.line = tokenizer.line
                place.column = tokenizer.column
                place.jsonPath = path
                let value = try tokenizer.readValue(depth: 2)
                do {
                    if key == "records" {
                        return .record(try RecordDecoder(path: path, place: place).record(from: value), place)
                    }
                    return .file(try RecordDecoder(path: path, place: place).file(from: value), place)
                } catch {
                    guard collecting else { throw error }
                    collectedErrors.append(error)
                    if collectedErrors.count >= limits.maximumReportedErrors {
                        state = .finished
                        return nil
                    }
                }
            case .finished:
                return nil
            }
        }
    }

    private func member(_ key: String) throws(BundleError) {
        switch key {
        case "records", "files":
            guard try tokenizer.peekSignificant() == 0x5B else { throw schemaError("must be an array") }
            try tokenizer.expect(0x5B, "'['")
            state = .array(key, 0)
        case "format":
            guard case .string("outpost-bundle") = try tokenizer.readValue(depth: 1) else {
                throw schemaError("must be \"outpost-bundle\"")
            }
        case "formatVersion":
            guard case .number(let number) = try tokenizer.readValue(depth: 1), let whole = number.wholeValue,
                let version = Int(exactly: whole), version >= 1
            else { throw schemaError("must be a positive integer") }
            guard BundleFormat.readableVersions.contains(version) else {
                throw locate(BundleError(.unsupportedFormatVersion,
                    message: "format version \(version) is not one this build reads (it reads \(BundleFormat.readableVersionsText))"))
            }
            formatVersion = version
        case "projectID":
            guard case .string(let text) = try tokenizer.readValue(depth: 1), let id = UUID(hyphenatedText: text) else {
                throw schemaError("must be a UUID")
            }
            projectID = id
        case "asOf":
            switch try tokenizer.readValue(depth: 1) {
            case .null: asOf = nil
            case .string(let text):
                guard let date = Timestamp.date(from: text) else { throw schemaError("must be an ISO 8601 UTC timestamp") }
                asOf = date
            default: throw schemaError("must be an ISO 8601 UTC timestamp or null")
            }
        case "checkpoints":
            guard case .array(let values) = try tokenizer.readValue(depth: 1), !values.isEmpty else {
                throw schemaError("must be a non-empty array of checkpoints")
            }
            var texts: [String] = []
            for value in values {
                guard case .string(let text) = value else { throw schemaError("must be an array of strings") }
                texts.append(text)
            }
            if let bad = BundleCheckpoints.firstInvalid(in: texts) { throw schemaError(bad) }
            checkpoints = texts
        default:
            throw locate(BundleError(.schemaViolation, message: "'\(key)' is not a property of a bundle"))
        }
    }

    private func header() throws(BundleError) -> BundleItem? {
        path = "$"
        for required in ["format", "formatVersion", "projectID", "records"] where !topKeys.contains(required) {
            throw locate(BundleError(.schemaViolation, message: "the bundle has no '\(required)'"))
        }
        guard let formatVersion, let projectID else { return nil }
        if formatVersion == 1, !checkpoints.isEmpty {
            path = "$.checkpoints"
            throw schemaError("checkpoints came with format version 2; a version 1 bundle has none")
        }
        return .header(BundleHeader(formatVersion: formatVersion, projectID: projectID, asOf: asOf, checkpoints: checkpoints))
    }

    private func schemaError(_ message: String) -> BundleError {
        locate(BundleError(.schemaViolation, message: message))
    }

    private func locate(_ error: BundleError) -> BundleError {
        var place = location
        place.jsonPath = path
        place.line = tokenizer.line
        place.column = tokenizer.column
        return error.located(place)
    }

    private enum State {
        case start
        case members(first: Bool)
        case array(String, Int)
        case finished
    }
}

/// `bundle.schema.json`'s rules for one record or file reference, with the JSON path of each failure.
private struct RecordDecoder {
    let path: String
    let place: SourceLocation

    /// A record object's properties, as found.
    private struct RecordProperties {
        var entity, id, serverID, version, createdAt, updatedAt, deletedAt, fields: JSONValue?
    }

    func record(from value: JSONValue) throws(BundleError) -> EntityRecord {
        guard case .object(let members) = value else { throw fail(path, "must be an object, found \(value.typeName)") }
        // The eight properties by a switch, not a dictionary built per record (hashing every key was a
        // sixth of decoding one, `perf`); a repeated key keeps its last value, as the dictionary did.
        var properties = RecordProperties()
        for (key, member) in members {
            switch key {
            case "entity": properties.entity = member
            case "id": properties.id = member
            case "serverID": properties.serverID = member
            case "version": properties.version = member
            case "createdAt": properties.createdAt = member
            case "updatedAt": properties.updatedAt = member
            case "deletedAt": properties.deletedAt = member
            case "fields": properties.fields = member
            default: throw fail("\(path).\(key)", "is not a property of a record")
            }
        }
        guard case .string(let name)? = properties.entity else {
            throw fail("\(path).entity", properties.entity == nil ? "is required" : "must be a string")
        }
        guard let entity = EntityType(rawValue: name), let shape = RecordShape.all[entity] else {
            throw fail("\(path).entity", "'\(name)' is not an entity (one of \(EntityType.allCases.map(\.rawValue).sorted().joined(separator: ", ")))")
        }
        let idText = try string(properties.id, "\(path).id", entity: entity, id: nil)
        guard let id = UUID(hyphenatedText: idText) else { throw fail("\(path).id", "'\(idText)' is not a UUID", entity: entity) }
        var serverID: String?
        switch properties.serverID {
        case nil, .null?: serverID = nil
        case .string(let text)?: serverID = text
        case let other?: throw fail("\(path).serverID", "must be a string or null, found \(other.typeName)", entity: entity, id: id)
        }
        let version = try integer(properties.version, "\(path).version", minimum: 0, entity: entity, id: id)
        let createdAt = try date(properties.createdAt, "\(path).createdAt", entity: entity, id: id)
        let updatedAt = try date(properties.updatedAt, "\(path).updatedAt", entity: entity, id: id)
        var deletedAt: Date?
        if let deleted = properties.deletedAt, case .null = deleted {
            deletedAt = nil
        } else if properties.deletedAt != nil {
            deletedAt = try date(properties.deletedAt, "\(path).deletedAt", entity: entity, id: id)
        }
        guard case .object(let fieldMembers)? = properties.fields else {
            throw fail("\(path).fields", properties.fields == nil ? "is required" : "must be an object", entity: entity, id: id)
        }
        var fields = shape.emptyFields
        for (name, value) in fieldMembers {
            guard let field = shape.description.field(named: name) else {
                throw fail("\(path).fields.\(name)", "is not a field of \(entity.rawValue)", entity: entity, id: id, field: name)
            }
            fields[name] = try fieldValue(value, field, "\(path).fields.\(name)", entity: entity, id: id)
        }
        for field in shape.description.fields where !field.isOptional && fields[field.name] == .null {
            throw fail("\(path).fields.\(field.name)", "is required", entity: entity, id: id, field: field.name)
        }
        let sync = SyncMetadata(
            serverID: serverID, version: version, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt,
            syncStatus: .synced, isOrphaned: false)
        return EntityRecord(entity: entity, id: id, fields: fields, sync: sync)
    }

    func file(from value: JSONValue) throws(BundleError) -> FileReference {
        guard case .object(let members) = value else { throw fail(path, "must be an object, found \(value.typeName)") }
        var byKey: [String: JSONValue] = [:]
        for (key, member) in members {
            guard ["name", "byteSize", "sha256"].contains(key) else { throw fail("\(path).\(key)", "is not a property of a file") }
            byKey[key] = member
        }
        let name = try string(byKey["name"], "\(path).name", entity: nil, id: nil)
        guard !name.isEmpty, name.utf8.count <= 1024 else { throw fail("\(path).name", "must hold 1 to 1024 bytes") }
        let size = try integer(byKey["byteSize"], "\(path).byteSize", minimum: 0, entity: nil, id: nil)
        let digest = try string(byKey["sha256"], "\(path).sha256", entity: nil, id: nil)
        guard JSONBundleReader.isSHA256(digest) else { throw fail("\(path).sha256", "must be 64 lowercase hex digits") }
        return FileReference(name: name, byteSize: size, sha256: digest)
    }

    /// `path` (and the paths below) are autoclosures: built for an error only, never for every field.
    private func fieldValue(
        _ value: JSONValue, _ field: FieldDescription, _ path: @autoclosure () -> String, entity: EntityType, id: UUID
    ) throws(BundleError) -> FieldValue {
        func mismatch(_ expected: String) -> BundleError {
            fail(path(), "must be \(expected)\(field.isOptional ? " or null" : ""), found \(value.typeName)",
                entity: entity, id: id, field: field.name)
        }
        if case .null = value {
            guard field.isOptional else { throw fail(path(), "is required and may not be null", entity: entity, id: id, field: field.name) }
            return .null
        }
        switch field.kind {
        case .text:
            guard case .string(let text) = value else { throw mismatch("a string") }
            return .text(text)
        case .choice(let allowed):
            guard case .string(let text) = value else { throw mismatch("a string") }
            guard allowed.contains(text) else {
                throw fail(path(), "'\(text)' is not one of \(allowed.joined(separator: ", "))", entity: entity, id: id, field: field.name)
            }
            return .text(text)
        case .day, .sha256, .date, .uuid, .blob:
            guard case .string(let text) = value else { throw mismatch("a string") }
            if case .day = field.kind, !Self.isDayShaped(text) {
                throw fail(path(), "'\(text)' is not a day (YYYY-MM-DD)", entity: entity, id: id, field: field.name)
            }
            if case .sha256 = field.kind, !JSONBundleReader.isSHA256(text) {
                throw fail(path(), "is not 64 lowercase hex digits", entity: entity, id: id, field: field.name)
            }
            guard let converted = FieldText.value(text, kind: field.kind) else {
                throw fail(path(), "'\(text.prefix(80))' is not a valid \(field.kind.storageKind)", entity: entity, id: id, field: field.name)
            }
            return converted
        case .integer, .money, .count:
            guard case .number(let number) = value else { throw mismatch("an integer") }
            guard let integer = number.wholeValue else {
                guard number.isInteger else { throw mismatch("an integer") }
                throw fail(path(), "\(number.text) does not fit in 64 bits", entity: entity, id: id, field: field.name)
            }
            if field.kind != .integer, integer < 0 {
                throw fail(path(), "is \(integer), must not be negative", entity: entity, id: id, field: field.name)
            }
            return .integer(integer)
        case .real, .quantity:
            guard case .number(let number) = value, let real = Double(number.text) else { throw mismatch("a number") }
            if field.kind == .quantity, real < 0 {
                throw fail(path(), "is \(number.text), must not be negative", entity: entity, id: id, field: field.name)
            }
            return .real(real)
        case .bool:
            guard case .bool(let flag) = value else { throw mismatch("a boolean") }
            return .bool(flag)
        }
    }

    private func string(_ value: JSONValue?, _ path: @autoclosure () -> String, entity: EntityType?, id: UUID?) throws(BundleError) -> String {
        guard let value else { throw fail(path(), "is required", entity: entity, id: id) }
        guard case .string(let text) = value else { throw fail(path(), "must be a string, found \(value.typeName)", entity: entity, id: id) }
        return text
    }

    private func integer(_ value: JSONValue?, _ path: @autoclosure () -> String, minimum: Int64, entity: EntityType?, id: UUID?) throws(BundleError) -> Int64 {
        guard let value else { throw fail(path(), "is required", entity: entity, id: id) }
        guard case .number(let number) = value, let integer = number.wholeValue else {
            // An integer past 64 bits was told "must be an integer, found integer".
            if case .number(let number) = value, number.isInteger {
                throw fail(path(), "is \(number.text), past the largest integer a bundle holds (\(Int64.max))", entity: entity, id: id)
            }
            throw fail(path(), "must be an integer, found \(value.typeName)", entity: entity, id: id)
        }
        guard integer >= minimum else { throw fail(path(), "is \(integer), must be at least \(minimum)", entity: entity, id: id) }
        return integer
    }

    private func date(_ value: JSONValue?, _ path: @autoclosure () -> String, entity: EntityType, id: UUID) throws(BundleError) -> Date {
        let text = try string(value, path(), entity: entity, id: id)
        guard let date = Timestamp.date(from: text) else {
            throw fail(path(), "'\(text.prefix(80))' is not an ISO 8601 UTC timestamp", entity: entity, id: id)
        }
        return date
    }

    private static func isDayShaped(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == 0x2D, bytes[7] == 0x2D else { return false }
        return bytes.enumerated().allSatisfy { $0.offset == 4 || $0.offset == 7 || (0x30...0x39).contains($0.element) }
    }

    private func fail(
        _ path: String, _ message: String, entity: EntityType? = nil, id: UUID? = nil, field: String? = nil
    ) -> BundleError {
        var place = self.place
        place.jsonPath = path
        return BundleError(.schemaViolation, message: message, entity: entity, id: id, field: field).located(place)
    }
}

extension JSONBundleReader {
    /// Whether `text` is a digest as bundles write it: 64 lowercase hex digits.
    static func isSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
