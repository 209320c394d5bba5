import Foundation
import GRDB
import OutpostStore
import Testing

/// `outpost bundle validate`, `outpost import` and `outpost bundle export`, run as a user would.
@Suite struct BundleCommandTests {
    /// The repository's `schemas/examples` folder, found by walking up from this file.
    static var examples: URL {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("schemas/examples").path) {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("schemas/examples")
    }

    @Test(arguments: ["project-bundle.xml", "project-bundle.json"])
    func theExamplesValidateImportOnceAndExportTheSameBytes(example: String) async throws {
        let folder = try TemporaryFolder()
        let bundle = Self.examples.appendingPathComponent(example).path
        let database = folder.file("device.sqlite")

        #expect(try await Outpost.run(["bundle", "validate", bundle]).status == 0)
        let first = try await Outpost.run(["import", bundle, "--db", database, "--json"])
        #expect(first.status == 0, "\(first.errorOutput)")
        let summary = try JSONSerialization.jsonObject(with: Data(first.output.utf8)) as? [String: Any]
        let firstTotals = summary?["total"] as? [String: Any]
        #expect((firstTotals?["inserted"] as? Int ?? 0) > 10, "\(first.output)")

        let second = try await Outpost.run(["import", bundle, "--db", database, "--json"])
        let secondTotals = (try JSONSerialization.jsonObject(with: Data(second.output.utf8)) as? [String: Any])?["total"] as? [String: Any]
        #expect(secondTotals?["inserted"] as? Int == 0)
        #expect(secondTotals?["updated"] as? Int == 0)

        let project = try #require(try await DatabaseQueue(path: database).read { try String.fetchAll($0, sql: "SELECT id FROM projects") }.first)
        let format = example.hasSuffix(".xml") ? "xml" : "json"
        let exported = folder.file("export.\(format)")
        let export = try await Outpost.run(["bundle", "export", "--db", database, "--project", project, "--format", format, "--out", exported])
        #expect(export.status == 0, "\(export.errorOutput)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: exported)) == Data(contentsOf: URL(fileURLWithPath: bundle)))
    }

    @Test func aBrokenBundleFailsWithItsLocationAndChangesNothing() async throws {
        let folder = try TemporaryFolder()
        let broken = folder.file("broken.xml")
        let text = try String(contentsOf: Self.examples.appendingPathComponent("project-bundle.xml"), encoding: .utf8)
        try text.replacingOccurrences(of: "<status>", with: "<statuz>", options: [], range: nil)
            .replacingOccurrences(of: "</status>", with: "</statuz>").write(toFile: broken, atomically: true, encoding: .utf8)
        let validate = try await Outpost.run(["bundle", "validate", broken])
        #expect(validate.status != 0)
        #expect(validate.errorOutput.contains("broken.xml:") || validate.output.contains("broken.xml:"))

        // A device's database, opened before (it has its node id): the failed import leaves every row as it was.
        let database = folder.file("device.sqlite")
        _ = try LocalStore.open(at: database)
        let before = try Self.rows(of: database)
        #expect(try await Outpost.run(["import", broken, "--db", database]).status != 0)
        #expect(try Self.rows(of: database) == before)
    }

    /// Every row of every table, by table (rows, not the file's bytes, which a WAL checkpoint rewrites).
    static func rows(of database: String) throws -> [String: [Row]] {
        try DatabaseQueue(path: database).read { db in
            var tables: [String: [Row]] = [:]
            for name in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") {
                tables[name] = try Row.fetchAll(db, sql: "SELECT * FROM \(name.quotedDatabaseIdentifier)")
            }
            return tables
        }
    }
}

