import ArgumentParser
import Foundation
import Outpost
import OutpostWire
import OutpostFieldService

/// `outpost presync`: a project's bundle downloaded from the server and imported, as `Device.preSync`
/// does it (the night before, on office Wi-Fi).
struct PreSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presync",
        abstract: "Download a project's bundle from the server and import it into a local database.",
        discussion: """
            The database is created or upgraded first. The import is one transaction, as outpost import's. On a \
            database that held none of the project's records, the next outpost sync pulls only what changed on \
            the server after the bundle was made. Exits 1 on a refusal (not a member, no such project).
            """
    )

    @OptionGroup var device: DeviceOptions

    @Option(help: "The project to pre-sync.")
    var project: String

    @Option(help: "The bundle format to download: json or xml.")
    var format: String = "json"

    @Flag(help: "Print the summary as JSON.")
    var json = false

    func run() async throws {
        let url = try self.device.serverURL()
        guard let id = UUID(uuidString: project) else { throw CommandFailure("--project: \(project) is not a UUID") }
        guard let format = BundleFormat(rawValue: format) else {
            throw CommandFailure("--format: \(format) is not json or xml")
        }
        let showProgress = isatty(STDERR_FILENO) == 1
        let summary: ImportSummary
        let positions: Int
        do {
            let device = try Device(
                path: self.device.db, app: .fieldService,
                server: .init(url: url, token: self.device.token, allowsPlainHTTP: self.device.allowPlainHttp))
            summary = try await device.preSync(project: id, format: format) { progress in
                guard showProgress else { return }
                BundleProgressBar.draw(progress)
            }
            positions = try device.store.bundlePositions().count
        } catch {
            if showProgress { BundleProgressBar.clear() }
            throw CommandFailure("\(error)")
        }
        if showProgress { BundleProgressBar.clear() }
        try ImportCommand.show(summary, of: "\(url.absoluteString) project \(id.uuidString.lowercased())", into: self.device.db, json: json)
        if !json {
            print(positions > 0
                ? "the next sync pulls only what changed after this bundle"
                : "the next sync pulls the project from its beginning: this database held some of its records, "
                    + "or the server names records by ids of its own (`outpost serve --server-ids`), whose references only a pull links")
        }
    }
}
