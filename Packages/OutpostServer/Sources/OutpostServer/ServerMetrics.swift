/// Counters behind `GET /metrics`: requests by route and status, and push outcomes, as plain
/// `name{labels} value` lines a person or a Prometheus scrape can read.
actor ServerMetrics {
    private var counts: [String: Int] = [:]

    func count(_ name: String, _ labels: [(String, String)] = []) {
        let key = labels.isEmpty ? name : name + "{" + labels.map { "\($0)=\"\($1)\"" }.joined(separator: ",") + "}"
        counts[key, default: 0] += 1
    }

    func add(_ name: String, _ amount: Int) {
        counts[name, default: 0] += amount
    }

    var text: String {
        counts.keys.sorted().map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: "\n") + "\n"
    }
}
