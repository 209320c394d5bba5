import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus

/// The server's metrics, made through swift-metrics (`Counter`, `Timer`, `Meter`) and kept by the
/// Prometheus exporter (swift-prometheus): `GET /metrics` writes them in Prometheus' text format, a
/// `# TYPE` line for every family. Each server keeps its own registry rather than bootstrapping the
/// process-wide metrics system, which can be set once: tests and tools run several servers in one
/// process, and an app embedding the server may bootstrap its own.
final class ServerMetrics: Sendable {
    private let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    /// The series `setEach` made, by label value.
    private let transient = NIOLockedValueBox<[String: Prometheus.Gauge]>([:])

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Request latencies from a 2 ms pull to a minute-long bundle download.
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
            .seconds(10), .seconds(30), .seconds(60),
        ]
        self.factory = factory
    }

    /// Adds one to the counter `name` with `labels`.
    func count(_ name: String, _ labels: [(String, String)] = []) {
        Counter(label: name, dimensions: labels, factory: factory).increment()
    }

    /// Adds `amount` to the counter `name` with `labels`.
    func add(_ name: String, _ amount: Int, _ labels: [(String, String)] = []) {
        guard amount > 0 else { return }
        Counter(label: name, dimensions: labels, factory: factory).increment(by: Int64(amount))
    }

    /// Records `duration` in the histogram `name` with `labels`.
    func time(_ name: String, _ labels: [(String, String)], _ duration: Duration) {
        Timer(label: name, dimensions: labels, factory: factory).recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// Sets the gauge `name` with `labels` to `value`.
    func set(_ name: String, _ value: Int, _ labels: [(String, String)] = []) {
        Meter(label: name, dimensions: labels, factory: factory).set(Double(value))
    }

    /// Sets the gauge `name` for each value of `label` to its count, and removes the series of values
    /// no longer given: a series swift-metrics made stays in the registry for good, so a label whose
    /// values come and go (projects with a push under way) is kept here, where a gone one is unregistered.
    func setEach(_ name: String, label: String, _ counts: [String: Int]) {
        transient.withLockedValue { gauges in
            for (value, count) in counts {
                let gauge = gauges[value] ?? registry.makeGauge(
                    descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: ""), labels: [(label, value)])
                gauge.set(Double(count))
                gauges[value] = gauge
            }
            for (value, gauge) in gauges where counts[value] == nil {
                registry.unregisterGauge(gauge)
                gauges[value] = nil
            }
        }
    }

    /// Every metric in Prometheus' text exposition format.
    var text: String { registry.emitToString() }
}
