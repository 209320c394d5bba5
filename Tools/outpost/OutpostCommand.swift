import ArgumentParser
import Foundation
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// The `outpost` tool: inspect and operate an Outpost store, bundle or server from a terminal.
@main
struct OutpostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outpost",
        abstract: "Offline-first data and sync toolkit for field-service apps.",
        version: OutpostVersion.current,
        subcommands: [EntitiesCommand.self, SchemaCommand.self, MigrateCommand.self, InfoCommand.self, StatusCommand.self, UnsentCommand.self, AuditCommand.self, ConflictsCommand.self, ImportCommand.self, BundleCommand.self, SyncCommand.self, PreSyncCommand.self, OriginalsCommand.self, ServeCommand.self, AdminCommand.self]
    )

    /// Installs the field-service schema, the one this tool works on, before any command runs (the
    /// toolkit guesses no app's schema), then runs the command.
    static func main() async {
        do {
            try EntityCatalog.install(EntityCatalog.fieldService)
        } catch {
            exit(withError: error)
        }
        await main(nil)
    }
}

/// The toolkit's version, printed by `outpost --version`.
enum OutpostVersion {
    static let current = "0.1.0"
}

/// Prints `value` as every `--json` of the CLI does: pretty, keys sorted, dates in ISO 8601 and
/// slashes (paths, addresses) as they are. One setup for every command: six had a copy each, and
/// they had drifted (slashes escaped in all but one).
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
