import ArgumentParser
import Foundation
import OutpostFieldService
import OutpostSchema
import OutpostStore

/// `outpost status`: what a sync status bar would show for a local database.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show pending and failed changes, open conflicts and the last successful sync of a local database.",
        discussion: "The file is upgraded to the latest schema first, as the app would on open."
    )

    @Option(help: "The database file.")
    var db: String

    @Flag(help: "Print JSON: pendingChanges, failedChanges, openConflicts, lastSuccessfulSync.")
    var json = false

    func run() throws {
        let status = try openExistingStore(db).status()
        if json {
            try printJSON(status)
        } else {
            print("pending changes:      \(status.pendingChanges)")
            print("failed changes:       \(status.failedChanges)")
            print("open conflicts:       \(status.openConflicts)")
            print("last successful sync: \(status.lastSuccessfulSync.map { $0.formatted(.iso8601) } ?? "never")")
            if let warning = status.clockWarning { print("clock:                \(OneLineText.escaping(warning))") }
            if status.quarantinedRecords > 0 {
                print("quarantined records:  \(status.quarantinedRecords) pulled records this version could not take in:")
                for record in try openExistingStore(db).quarantinedRecords().prefix(10) {
                    print("  \(record.entity.rawValue) \(record.recordID.uuidString.lowercased()): \(OneLineText.escaping(record.reason))")
                }
            }
            for project in status.leftProjects {
                print("left project:         \(project.uuidString.lowercased()) (no longer a member; see outpost unsent)")
            }
        }
    }
}

/// `outpost audit`: checks on the local audit trail.
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Check the hash-chained audit trail of a local database.",
        subcommands: [Verify.self]
    )

    /// `outpost audit verify`: walk the chain and name the first broken entry.
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: """
                Walk the audit chain end to end, and the queue against it; exit 1 and name the first entry \
                that was edited, removed or reordered, or a queued change that does not match its entry. \
                A file whose pages SQLite's quick_check finds damaged is reported (exit 1) and left as it \
                is; otherwise the file is first upgraded to this build's schema, as every command that \
                opens it does.
                """
        )

        @Option(help: "The database file.")
        var db: String

        func run() throws {
            try requireDatabaseFile(db)
            let damage: String?
            do {
                damage = try LocalStore.pageDamage(at: db)
            } catch {
                throw CommandFailure("\(error)")
            }
            if let damage {
                throw CommandFailure("\(db) is damaged, so its audit chain cannot be vouched for; nothing was written to it: \(damage)")
            }
            let report = try openExistingStore(db).verifyAudit()
            if report.isIntact {
                print("audit chain intact: \(report.entriesChecked) entries")
                return
            }
            if let broken = report.firstBrokenEntry {
                throw CommandFailure(
                    "audit chain broken at entry \(broken): \(report.problem ?? "") (\(report.entriesChecked) entries before it hold)")
            }
            // The chain holds; the queue does not match it (`AuditReport.brokenMutation`).
            throw CommandFailure(
                "audit chain intact (\(report.entriesChecked) entries), but \(report.problem ?? "a queued mutation does not match it")")
        }
    }
}

/// Refuses a database path with no file: the CLI never creates an empty one by accident.
func requireDatabaseFile(_ path: String) throws {
    guard FileManager.default.fileExists(atPath: path) else {
        throw CommandFailure("\(path): no database file here")
    }
}

/// Opens a store that must already exist (`requireDatabaseFile`).
func openExistingStore(_ path: String) throws -> LocalStore {
    try requireDatabaseFile(path)
    do {
        return try LocalStore.open(at: path)
    } catch {
        throw CommandFailure("\(error)")
    }
}

/// `outpost unsent`: the changes this device made that the server has not taken, to hand over.
struct UnsentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unsent",
        abstract: "List every change of this device the server has not taken (waiting, in flight or refused).",
        discussion: """
            A crew member taken off a project keeps the changes they made to it: the server refuses them, \
            and they stay here. --json prints each whole (entity, record id, operation, fields with their \
            clocks, status, the server's reason) for the office to enter or send again.
            """
    )

    @Option(help: "The database file.")
    var db: String

    @Flag(help: "Print the changes as a JSON array, fields included.")
    var json = false

    func run() throws {
        let unsent = try openExistingStore(db).unsentChanges()
        if json {
            try printJSON(unsent)
            return
        }
        print("\(unsent.count) unsent change\(unsent.count == 1 ? "" : "s")")
        for change in unsent {
            // A refusal's reason quotes the server's text.
            let reason = OneLineText.escaping((change.unreadable.map { ": unreadable: \($0)" } ?? "") + (change.lastError.map { ": \($0)" } ?? ""))
            print("  \(change.status.rawValue) \(change.operation.rawValue) \(change.entity.rawValue) \(change.recordID.uuidString.lowercased())\(reason)")
        }
    }
}
