import ArgumentParser
import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostStore

/// `outpost import PATH --db DB`: import a pre-sync bundle in one transaction.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a pre-sync bundle (.xml, .json or .zip) into a local database.",
        discussion: """
            The database is created or upgraded to the latest schema first. The import is one transaction: \
            on any error nothing is written and the error says where. Records with unsynced local changes \
            are left as they are and counted. A progress bar shows on a terminal.
            """
    )

    @Argument(help: "The bundle file.")
    var path: String

    @Option(help: "The database file.")
    var db: String

    @Flag(help: "Print the summary as JSON.")
    var json = false

    func run() throws {
        let showProgress = isatty(STDERR_FILENO) == 1
        let summary: ImportSummary
        do {
            let store = try LocalStore.open(at: db)
            summary = try store.importBundle(at: URL(fileURLWithPath: path)) { progress in
                guard showProgress else { return }
                BundleProgressBar.draw(progress)
            }
        } catch {
            if showProgress { BundleProgressBar.clear() }
            throw CommandFailure("\(error)")
        }
        if showProgress { BundleProgressBar.clear() }
        try Self.show(summary, of: path, into: db, json: json)
    }

    /// Prints an import's summary, as a table or as JSON (shared with `outpost presync`).
    static func show(_ summary: ImportSummary, of path: String, into db: String, json: Bool) throws {
        if json {
            try printJSON(summary)
            return
        }
        print("imported \(path) (\(summary.format), \(summary.bytesRead) bytes) into \(db)")
        let headers = [
            "entity", "inserted", "updated", "unchanged", "local changes kept", "refreshed around local changes",
            "outdated", "orphaned",
        ]
        func row(_ name: String, _ counts: ImportCounts) -> [String] {
            [name] + [counts.inserted, counts.updated, counts.unchanged, counts.skippedLocallyModified,
                counts.refreshedAroundLocalChanges, counts.skippedOutdated, counts.orphaned].map(String.init)
        }
        let rows = summary.byEntity.keys.sorted().map { row($0, summary.byEntity[$0]!) } + [row("total", summary.total)]
        print(TextTable(headers: headers, rows: rows).rendered)
        if summary.filesVerified > 0 { print("files verified: \(summary.filesVerified), newly stored: \(summary.filesStored)") }
    }
}
