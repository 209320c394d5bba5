import Foundation

/// A YAML document as a real YAML parser reads it (PyYAML's `safe_load`, through `python3`, which the
/// Makefile installs with PyYAML), in its key order: what tests hold contract files to. A purpose-built
/// reader of the document's indentation once accepted a file that no YAML parser would.
public indirect enum YAMLNode: Sendable, Equatable {
    case scalar(String)
    case mapping([Pair])
    case sequence([YAMLNode])

    /// One key of a mapping, with its value.
    public struct Pair: Sendable, Equatable {
        public let key: String
        public let value: YAMLNode
    }

    /// Reads the file at `path`; throws the parser's own message when it is not valid YAML.
    public static func parse(contentsOf path: String) async throws -> YAMLNode {
        // Mappings become [[key, value], ...] so their order survives JSON; scalars become text.
        let script = """
            import json, sys, yaml
            def tree(node):
                if isinstance(node, dict):
                    return {"m": [[str(k), tree(v)] for k, v in node.items()]}
                if isinstance(node, list):
                    return {"s": [tree(v) for v in node]}
                if node is None:
                    return {"v": ""}
                if isinstance(node, bool):
                    return {"v": "true" if node else "false"}
                return {"v": str(node)}
            with open(sys.argv[1], encoding="utf-8") as file:
                json.dump(tree(yaml.safe_load(file)), sys.stdout)
            """
        let output = try await Python.run(script, arguments: [path])
        return try node(from: JSONSerialization.jsonObject(with: output))
    }

    /// Validates the OpenAPI document at `path` with openapi-spec-validator; throws its findings.
    public static func validateOpenAPI(at path: String) async throws {
        _ = try await Python.run(
            "import sys\nfrom openapi_spec_validator import validate\nfrom openapi_spec_validator.readers import read_from_filename\n"
                + "spec, _ = read_from_filename(sys.argv[1])\nvalidate(spec)\n",
            arguments: [path])
    }

    /// The value of `key`, in a mapping.
    public subscript(key: String) -> YAMLNode? {
        guard case .mapping(let pairs) = self else { return nil }
        return pairs.first { $0.key == key }?.value
    }

    /// A mapping's keys, in order.
    public var keys: [String] {
        guard case .mapping(let pairs) = self else { return [] }
        return pairs.map(\.key)
    }

    /// A sequence's scalar items.
    public var scalars: [String] {
        guard case .sequence(let items) = self else { return [] }
        return items.compactMap { if case .scalar(let text) = $0 { text } else { nil } }
    }

    /// A scalar's text.
    public var text: String? {
        if case .scalar(let text) = self { return text }
        return nil
    }

    private static func node(from object: Any) throws -> YAMLNode {
        guard let object = object as? [String: Any] else { throw Python.Failure(message: "unexpected tree") }
        if let pairs = object["m"] as? [[Any]] {
            return .mapping(try pairs.map { pair in
                guard pair.count == 2, let key = pair[0] as? String else { throw Python.Failure(message: "unexpected pair") }
                return Pair(key: key, value: try node(from: pair[1]))
            })
        }
        if let items = object["s"] as? [Any] { return .sequence(try items.map(node(from:))) }
        return .scalar(object["v"] as? String ?? "")
    }
}

/// `python3 -c SCRIPT ARGUMENTS…`: its standard output, or its standard error as the thrown message.
enum Python {
    struct Failure: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// Runs off the cooperative pool (see `offThePool`).
    static func run(_ script: String, arguments: [String]) async throws -> Data {
        try await offThePool { try runBlocking(script, arguments: arguments) }
    }

    private static func runBlocking(_ script: String, arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script] + arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read before waiting: a document larger than a pipe's buffer would otherwise never finish.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let failure = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(message: String(decoding: failure, as: UTF8.self))
        }
        return data
    }
}
