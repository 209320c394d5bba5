import ArgumentParser
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// `outpost entities`: the entity catalog, as a table for people or JSON for scripts.
struct EntitiesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "entities",
        abstract: "List every entity type: its table, parents, sync class and conflict strategy.",
        discussion: "Entities are listed parents first, the order in which creates sync and bundles import."
    )

    @Flag(help: "Print a JSON array instead of a table.")
    var json = false

    func run() throws {
        let policy = ConflictPolicy()
        let rows = EntityCatalog.all.map { EntityRow($0, strategy: policy[$0.type]) }
        if json {
            try printJSON(rows)
        } else {
            print(TextTable(
                headers: ["entity", "table", "parents", "sync class", "policy", "fields"],
                rows: rows.map { row in
                    [row.name, row.table, row.parents.isEmpty ? "—" : row.parents.joined(separator: ", "),
                     row.syncClass, row.policy, String(row.fields.count)]
                }
            ).rendered)
        }
    }
}

/// One entity as `outpost entities --json` prints it.
struct EntityRow: Encodable {
    let name: String
    let table: String
    let parents: [String]
    let syncClass: String
    let policy: String
    let fields: [String]

    init(_ description: EntityDescription, strategy: ConflictStrategy) {
        name = description.type.rawValue
        table = description.table
        parents = description.parentEntities.map(\.rawValue)
        syncClass = description.syncClass.rawValue
        policy = strategy.name.rawValue
        fields = description.fields.map(\.name)
    }
}
