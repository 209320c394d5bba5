import ArgumentParser
import OutpostFieldService
import OutpostSchema
import OutpostStore

/// `outpost migrate`: upgrade (or create) a local database to the latest schema, or to a given version.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Upgrade a local database to the latest schema version (or to --to N).",
        discussion: """
            Prints 'v<from> -> v<to>' and the steps applied. Each step runs in its own transaction: if the \
            process is stopped, the database stays at the last completed version and the next run goes on. \
            A database written by a newer Outpost, or a step that would remove data, is refused and left untouched.
            """
    )

    @Option(help: "The database file; created when it does not exist.")
    var db: String

    @Option(help: "The version to stop at (default: the latest).")
    var to: Int?

    func run() throws {
        do {
            let outcome = try LocalDatabase.migrate(at: db, to: to)
            print("v\(outcome.from) -> v\(outcome.to)")
            for version in outcome.applied {
                print("  applied v\(version): \(LocalSchema.steps[version - 1].name)")
            }
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}

/// A failure already explained to the user: the message goes to standard error, the exit code is 1.
/// On one line, each control, direction and hidden character written as `\u{…}` (`OneLineText.escaping`,
/// as every line `outpost` prints that quotes a bundle's or a server's text): an escape sequence printed
/// raw would drive the terminal (recolour it, retitle the window), a carriage return or newline fake
/// whole output lines, a direction override turn them around (attack 114, F6).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ message: String) { description = OneLineText.escaping(message) }
}
