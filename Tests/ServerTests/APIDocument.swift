import Foundation

/// The parts of `schemas/sync-api.yaml` the contract test needs, read by a small purpose-built reader
/// of its indentation (the document is plain block YAML): every path's methods with their status
/// codes and the schema of their 200 answer, each component schema's properties and required keys,
/// and the error codes. Yams would cost build time for one test.
struct APIDocument {
    struct Operation: Hashable {
        var path: String
        var method: String
        var statuses: Set<Int> = []
        var okSchema: String?
    }

    struct Schema {
        var properties: Set<String> = []
        var required: Set<String> = []
    }

    var operations: [Operation] = []
    var schemas: [String: Schema] = [:]
    var errorCodes: Set<String> = []

    static func load(from file: String = #filePath) throws -> APIDocument {
        var directory = URL(fileURLWithPath: file).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("schemas/sync-api.yaml").path) {
            guard directory.path != "/" else { throw CocoaError(.fileNoSuchFile) }
            directory.deleteLastPathComponent()
        }
        return APIDocument(text: try String(contentsOf: directory.appendingPathComponent("schemas/sync-api.yaml"), encoding: .utf8))
    }

    init(text: String) {
        var section = ""
        var path = ""
        var operation: Operation?
        var status: Int?
        var schemaName: String?
        var list = ""
        var property = ""
        func flush() {
            if let operation { operations.append(operation) }
            operation = nil
        }
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(raw)
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            let indent = line.prefix { $0 == " " }.count
            let key = trimmed.hasSuffix(":") ? String(trimmed.dropLast()).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) : nil
            if indent == 0 {
                flush()
                section = key ?? ""
                continue
            }
            switch section {
            case "paths":
                if indent == 2, let key {
                    flush()
                    path = key
                } else if indent == 4, let key, ["get", "put", "post", "delete", "patch"].contains(key) {
                    flush()
                    operation = Operation(path: path, method: key.uppercased())
                    status = nil
                } else if indent == 8, let key, let code = Int(key), operation != nil {
                    operation?.statuses.insert(code)
                    status = code
                } else if indent > 8, status == 200, trimmed.hasPrefix("$ref:"), operation?.okSchema == nil {
                    operation?.okSchema = trimmed.components(separatedBy: "/").last?
                        .trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
                }
            case "components":
                if indent == 2 { list = key ?? ""; continue }
                guard list == "schemas" else { continue }
                if indent == 4, let key {
                    schemaName = key
                    schemas[key] = Schema()
                } else if indent == 6, let key {
                    property = key
                } else if let name = schemaName, indent == 8 {
                    if property == "required", trimmed.hasPrefix("- ") {
                        schemas[name]?.required.insert(String(trimmed.dropFirst(2)))
                    } else if property == "properties", let key {
                        schemas[name]?.properties.insert(key)
                    }
                } else if schemaName == "ErrorBody", indent == 12, trimmed.hasPrefix("- ") {
                    errorCodes.insert(String(trimmed.dropFirst(2)))
                }
            default:
                continue
            }
        }
        flush()
    }
}
