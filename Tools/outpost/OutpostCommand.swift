import ArgumentParser

/// The `outpost` tool: inspect and operate an Outpost store, bundle or server from a terminal.
@main
struct OutpostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outpost",
        abstract: "Offline-first data and sync toolkit for field-service apps.",
        version: OutpostVersion.current,
        subcommands: [EntitiesCommand.self, SchemaCommand.self, MigrateCommand.self, InfoCommand.self, StatusCommand.self, UnsentCommand.self, AuditCommand.self, ConflictsCommand.self, ImportCommand.self, BundleCommand.self, SyncCommand.self, ServeCommand.self, AdminCommand.self]
    )
}

/// The toolkit's version, printed by `outpost --version`.
enum OutpostVersion {
    static let current = "0.1.0"
}
