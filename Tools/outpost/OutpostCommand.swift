import ArgumentParser
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
