import ArgumentParser
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostSchema
import OutpostStore
import OutpostSync
import OutpostWire

/// `outpost sync`: one sync run of a local database against a server, as the app would run it.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Run one sync of a local database against a server: pull, push parents first, then media if asked.",
        discussion: """
            Exits 0 when the run pulled everything and sent every ready change, 2 when it could not finish \
            (no connection, a time budget, a pause such as rejected credentials); what is left stays queued \
            for the next run. A change waiting out its retry delay after a failed attempt is not ready: a \
            run that ends before the delay exits 0 with it still queued, counted in "still pending". \
            Killing it at any moment loses nothing: the next run resumes.
            """
    )

    @OptionGroup var device: DeviceOptions

    @Option(help: "Stop cleanly after this many seconds: no batch starts after it, and a request in flight is cancelled (its changes stay queued).")
    var budget: Double?

    @Flag(help: "Upload photos' original files in this run, whatever the connection.")
    var media = false

    @Flag(help: "Put every failed change and failed media upload back in line before the run (once its cause is fixed).")
    var retryFailed = false

    @Option(help: "Conflict strategies that differ from the catalog's, as the server was started with (outpost serve --conflict-policy).")
    var conflictPolicy: String = "default"

    @Flag(help: "Print the run's report as JSON; a run that fails prints {\"complete\": \"false\", \"error\": ...} and exits 1.")
    var json = false

    func run() async throws {
        do {
            try await syncOnce()
        } catch let error where json && !(error is ExitCode) {
            // A script that asked for JSON parses stdout whatever happened; the message still goes to
            // stderr (ArgumentParser prints the rethrown error) for the person reading the terminal.
            try printJSON(["complete": "false", "error": "\(error)"])
            throw error
        }
    }

    private func syncOnce() async throws {
        let url = try device.serverURL()
        let store = try openExistingStore(device.db)
        var configuration = HTTPTransport.Configuration(baseURL: url, schemaVersion: LocalSchema.latestVersion)
        configuration.allowsPlainHTTP = device.allowPlainHttp
        let transport = HTTPTransport(configuration: configuration, token: device.token)
        guard let policy = SyncProtocol.conflictPolicy(fromText: conflictPolicy, strict: true) else {
            throw CommandFailure("--conflict-policy: expected entity=strategy pairs, comma-separated, each entity once, such as issue=manual (`outpost entities` names them)")
        }
        let engine = SyncEngine(store: store, transport: transport, policy: policy)
        let retried = retryFailed ? try store.retryFailedMutations() + store.retryFailedMediaUploads() : 0
        if retried > 0, !json { print("\(retried) failed changes put back in line") }
        let report: SyncReport
        do {
            report = try await engine.sync(
                budget: budget.map { .milliseconds(Int64($0 * 1000)) }, conditions: SyncConditions(mediaRequested: media))
        } catch {
            throw CommandFailure("\(error)")
        }
        // As `Device.sync` does: what the run deleted, or a file's records it removed, takes their cached
        // originals and stored bundle files with them. A sweep that fails leaves them for the next run.
        let swept = (try? store.sweepOriginals()) ?? 0
        let status = try store.status()
        if json {
            let summary: [String: String] = [
                "complete": "\(report.isComplete)", "pulled": "\(report.pulled)", "pushed": "\(report.pushed)",
                "failed": "\(report.failed)", "conflictsSurfaced": "\(report.conflictsSurfaced)",
                "mediaUploaded": "\(report.mediaUploaded)", "bytesSent": "\(report.bytesSent)",
                "bytesReceived": "\(report.bytesReceived)", "pendingChanges": "\(status.pendingChanges)",
                "retriedFailed": "\(retried)", "quarantined": "\(report.quarantined)",
                "historyChanged": "\(report.historyChanged)", "resent": "\(report.resent)",
                "recreated": "\(report.rebuilt?.recreated ?? 0)", "removed": "\(report.rebuilt?.removed ?? 0)",
                "kept": "\(report.rebuilt?.kept ?? 0)",
                "unheldImportsRemoved": "\(report.unheldImports.removed)", "unheldImportsResent": "\(report.unheldImports.recreated)",
                "filesRemoved": "\(swept)", "error": report.lastTransportError.map { "\($0)" } ?? "",
                "pullApplyingSeconds": Self.seconds(report.pullApplying), "pullWaitingSeconds": Self.seconds(report.pullWaiting),
            ]
            try printJSON(summary)
        } else {
            print("pulled \(report.pulled), sent \(report.pushed), failed \(report.failed), conflicts \(report.conflictsSurfaced), photos uploaded \(report.mediaUploaded)")
            print("traffic: \(report.bytesSent) bytes sent, \(report.bytesReceived) received; \(status.pendingChanges) changes still pending")
            if report.pulled > 0 {
                // Which side a slow pull waits on: this device's store, or the server and the network.
                print("pull: \(Self.seconds(report.pullApplying)) s applying pages, \(Self.seconds(report.pullWaiting)) s waiting for them")
            }
            if report.historyChanged {
                print(
                    "the server was restored from a backup: pulled everything again; sent again \(report.resent) changes "
                        + "and \(report.rebuilt?.recreated ?? 0) records it had lost, removed \(report.rebuilt?.removed ?? 0) "
                        + "records of others it no longer has"
                        + ((report.rebuilt?.kept ?? 0) > 0
                            ? ", kept \(report.rebuilt?.kept ?? 0) projects others made, for their devices to send again"
                            : ""))
            }
            if report.unheldImports.removed + report.unheldImports.recreated > 0 {
                print(
                    "imported bundle files brought \(report.unheldImports.removed + report.unheldImports.recreated) records the server "
                        + "does not hold (or you may not see): removed \(report.unheldImports.removed), queued to send "
                        + "\(report.unheldImports.recreated) you changed")
            }
            if swept > 0 { print("removed \(swept) stored files no record names any more") }
            if report.quarantined > 0 {
                print("quarantined \(report.quarantined) pulled records this version could not take in (outpost status lists them)")
            }
            // The error and the policy names quote the server's own text.
            if let error = report.lastTransportError { print("last transport error: \(OneLineText.escaping("\(error)"))") }
            if let pause = report.pause { print("paused: \(pause.rawValue)") }
            for difference in report.conflictPolicyDifferences { print("  conflict policy differs: \(OneLineText.escaping("\(difference)"))") }
        }
        if !report.isComplete { throw ExitCode(2) }
    }

    /// A duration as seconds with two decimals, as the report prints it.
    static func seconds(_ duration: Duration) -> String {
        String(format: "%.2f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}

/// A device's database and the server it syncs with, as `outpost sync` and `outpost originals` take them.
struct DeviceOptions: ParsableArguments {
    @Option(help: "The database file.")
    var db: String

    @Option(help: "The server's base URL, such as http://127.0.0.1:8080.")
    var server: String

    @Option(help: "The bearer token of the crew member this device belongs to.")
    var token: String

    @Flag(help: "Allow plain http:// to a server other than this machine (a network you trust); https otherwise.")
    var allowPlainHttp = false

    /// `--server` as a URL, refused unless http(s).
    func serverURL() throws -> URL {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
            throw CommandFailure("\(server) is not an http(s) URL")
        }
        return url
    }
}
