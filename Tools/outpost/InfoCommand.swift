import ArgumentParser
import Foundation
import OutpostFieldService
import OutpostStore

/// `outpost info`: what a local database holds, without changing it.
struct InfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show a local database's schema version, applied steps and row counts per table."
    )

    @Option(help: "The database file.")
    var db: String

    @Flag(help: "Print JSON: schemaVersion, latestKnownVersion, steps, tables.")
    var json = false

    @Flag(help: "Print the normalized schema SQL instead (the form of schemas/local/vN.sql).")
    var schema = false

    func run() throws {
        do {
            if schema {
                print(try LocalDatabase.schemaSQL(at: db), terminator: "")
                return
            }
            let summary = try LocalDatabase.inspect(at: db)
            if json {
                try printJSON(summary)
                return
            }
            print("database:       \(db)")
            print("schema version: v\(summary.schemaVersion) (this build knows up to v\(summary.latestKnownVersion))")
            print("applied steps:")
            for step in summary.steps { print("  v\(step.version)  \(step.name)") }
            print("tables:")
            print(TextTable(
                headers: ["table", "rows"],
                rows: summary.tables.sorted { $0.key < $1.key }.map { [$0.key, String($0.value)] }
            ).rendered.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
