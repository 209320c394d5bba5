import Foundation

/// A `/metrics` answer as a real Prometheus text-format parser reads it (the Prometheus Python client's
/// `text_string_to_metric_families`, through `python3`, which the Makefile installs), so a test checks the
/// exposition a scraper sees rather than its own reading of it.
public enum PrometheusText {
    /// One metric family: its name (the parser drops a counter's `_total`), its type (`unknown` when the
    /// text gave no `# TYPE` line) and its samples as `name{labels}` → value.
    public struct Family: Sendable, Equatable {
        public let name: String
        public let type: String
        public let samples: [String: Double]
    }

    /// Parses `text`; throws the parser's own message when it refuses it.
    public static func families(in text: String) async throws -> [Family] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString).txt")
        try Data(text.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = []
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                samples = {}
                for sample in family.samples:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    samples[sample.name + ("{" + labels + "}" if labels else "")] = sample.value
                out.append({"name": family.name, "type": family.type, "samples": samples})
            print(json.dumps(out))
            """
        let data = try await Python.run(script, arguments: [file.path])
        let objects = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
        return objects.map { object in
            Family(
                name: object["name"] as? String ?? "", type: object["type"] as? String ?? "",
                samples: (object["samples"] as? [String: Any] ?? [:]).compactMapValues { ($0 as? NSNumber)?.doubleValue })
        }
    }
}
