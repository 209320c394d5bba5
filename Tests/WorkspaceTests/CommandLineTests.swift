import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// Runs the built `outpost` executable, as a user would, and reads what it prints.
@Suite(.fieldService) struct CommandLineTests {
    @Test func entitiesAsJSONListsEveryEntityWithItsParents() async throws {
        let result = try await Outpost.run(["entities", "--json"])
        #expect(result.status == 0)
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.output.utf8))
        #expect(Set(rows.map(\.name)) == Set(EntityType.allCases.map(\.rawValue)))
        let byName = Dictionary(uniqueKeysWithValues: rows.map { ($0.name, $0) })
        #expect(byName["scope"]?.parents == ["project"])
        #expect(byName["project"]?.parents == ["opportunity"])
        #expect(byName["scopeItem"]?.parents.first == "scope")
        #expect(byName["measure"]?.parents == ["measureSheet"])
        #expect(byName["measureSheet"]?.parents == ["scope"])
        #expect(byName["fee"]?.policy == "serverWins")
        #expect(byName["mediaAttachment"]?.syncClass == "media")
        #expect(byName["timeEntry"]?.table == "time_entries")
    }

    @Test func entitiesAsATableHasAHeaderAndARowPerEntity() async throws {
        let result = try await Outpost.run(["entities"])
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n")
        #expect(lines.first?.hasPrefix("entity") == true)
        #expect(lines.count == 2 + EntityType.allCases.count)
        #expect(lines.contains { $0.hasPrefix("scopeItem ") && $0.contains("scope_items") })
    }

    @Test func everyCommandHasHelpAndTheToolHasAVersion() async throws {
        let version = try await Outpost.run(["--version"])
        #expect(version.status == 0)
        #expect(version.output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".").count == 3)
        for command in [[], ["entities"]] {
            let help = try await Outpost.run(command + ["--help"])
            #expect(help.status == 0)
            #expect(help.output.contains("USAGE: outpost"))
        }
    }

    @Test func anUnknownCommandFailsWithAMessage() async throws {
        let result = try await Outpost.run(["teleport"])
        #expect(result.status != 0)
        #expect(result.errorOutput.contains("teleport"))
    }

    struct Row: Decodable {
        let name: String
        let table: String
        let parents: [String]
        let syncClass: String
        let policy: String
    }
}

