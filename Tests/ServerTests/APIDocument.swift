import Foundation
import OutpostTesting

/// The parts of `schemas/sync-api.yaml` the contract test needs, as a real YAML parser reads the
/// document (`OutpostTesting.YAMLNode`): every path's methods with their status codes and the schema of
/// their success answer (200 or 201), each component schema's properties and required keys, and the error codes.
struct APIDocument {
    struct Operation: Hashable {
        var path: String
        var method: String
        var statuses: Set<Int> = []
        /// The schema of the success answer (200, or 201 for a route that creates).
        var okSchema: String?
    }

    struct Schema {
        var properties: Set<String> = []
        var required: Set<String> = []
    }

    var operations: [Operation] = []
    var schemas: [String: Schema] = [:]
    var errorCodes: Set<String> = []

    /// Where the document is, found from this file upwards.
    static func path(from file: String = #filePath) throws -> String {
        var directory = URL(fileURLWithPath: file).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("schemas/sync-api.yaml").path) {
            guard directory.path != "/" else { throw CocoaError(.fileNoSuchFile) }
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("schemas/sync-api.yaml").path
    }

    static func load() async throws -> APIDocument {
        APIDocument(try await YAMLNode.parse(contentsOf: try path()))
    }

    init(_ document: YAMLNode) {
        let methods = ["get", "put", "post", "delete", "patch"]
        for path in document["paths"]?.keys ?? [] {
            let item = document["paths"]?[path]
            for method in item?.keys ?? [] where methods.contains(method) {
                var operation = Operation(path: path, method: method.uppercased())
                let responses = item?[method]?["responses"]
                for status in responses?.keys ?? [] {
                    guard let code = Int(status) else { continue }
                    operation.statuses.insert(code)
                    if (200..<300).contains(code), case .mapping(let content)? = responses?[status]?["content"] {
                        let reference = content.lazy.compactMap { $0.value["schema"]?["$ref"]?.text }.first
                        operation.okSchema = reference?.components(separatedBy: "/").last
                    }
                }
                operations.append(operation)
            }
        }
        let components = document["components"]?["schemas"]
        for name in components?.keys ?? [] {
            let schema = components?[name]
            schemas[name] = Schema(
                properties: Set(schema?["properties"]?.keys ?? []), required: Set(schema?["required"]?.scalars ?? []))
        }
        errorCodes = Set(components?["ErrorBody"]?["properties"]?["code"]?["enum"]?.scalars ?? [])
    }
}
