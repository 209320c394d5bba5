import ArgumentParser
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostStore

/// `outpost conflicts`: values that lost a conflict, kept for the user to override or discard.
struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List open conflicts of a local database, or resolve one.",
        subcommands: [List.self, Resolve.self]
    )

    /// `outpost conflicts list`.
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List open conflicts, oldest first.")

        @Option(help: "The database file.")
        var db: String

        @Flag(help: "Print a JSON array.")
        var json = false

        func run() throws {
            let conflicts = try openExistingStore(db).openConflicts()
            if json {
                try printJSON(conflicts)
                return
            }
            guard !conflicts.isEmpty else {
                print("no open conflicts")
                return
            }
            print(TextTable(
                headers: ["id", "entity", "record", "field", "strategy", "this device", "server", "lost"],
                rows: conflicts.map { conflict in
                    [String(conflict.id), conflict.entity.rawValue, conflict.recordID.uuidString.lowercased(),
                     conflict.field ?? "(\(conflict.kind.rawValue))", conflict.strategy.rawValue, Self.show(conflict.localValue),
                     Self.show(conflict.remoteValue), Self.show(conflict.losingSide)]
                }
            ).rendered)
        }

        /// Whose value `override` would bring back.
        static func show(_ side: Side?) -> String {
            switch side {
            case .client?: "this device"
            case .server?: "server"
            case nil: "?"
            }
        }

        static func show(_ value: FieldValue?) -> String {
            switch value {
            case nil, .null?: "—"
            case .text(let text)?: "\"\(text.count > 40 ? text.prefix(39) + "…" : Substring(text))\""
            case .integer(let number)?: String(number)
            case .real(let number)?: String(number)
            case .bool(let flag)?: String(flag)
            case .date(let date)?: Timestamp.string(from: date)
            case .uuid(let id)?: id.uuidString.lowercased()
            case .blob(let data)?: "\(data.count) bytes"
            }
        }
    }

    /// `outpost conflicts resolve`.
    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resolve a conflict: override brings the losing value back as a new change; discard keeps the winner."
        )

        @Option(help: "The database file.")
        var db: String

        @Argument(help: "The conflict's id, as 'conflicts list' shows it.")
        var id: Int64

        @Option(help: "override or discard.")
        var choice: ConflictChoice

        func run() async throws {
            do {
                try await openExistingStore(db).resolveConflict(id, choice: choice)
                print("conflict \(id): \(choice.rawValue)")
            } catch let error as StoreError {
                throw CommandFailure("\(error)")
            }
        }
    }
}

extension ConflictChoice: @retroactive ExpressibleByArgument {}
