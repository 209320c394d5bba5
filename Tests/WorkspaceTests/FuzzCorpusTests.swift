import Foundation
import GRDB
import OutpostFieldServiceTesting
import Testing

/// Replays the fuzz corpus (`Fuzz/Corpus`: the known attacks and every input `make fuzz` ever found
/// crashing, kept under `regressions`) through `outpost import`, as the libFuzzer target does: each
/// input is refused with a clear error or imported, never a crash, and a refused one leaves the
/// device database exactly as it was.
@Suite("fuzz corpus", .fieldService)
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus")

    /// Every input of the attack and regression folders.
    static var inputs: [String] {
        ["attacks", "regressions"].flatMap { folder -> [String] in
            let names = (try? FileManager.default.contentsOfDirectory(atPath: corpus.appendingPathComponent(folder).path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { "\(folder)/\($0)" }
        }
    }

    /// The extension the fuzz target gives an input: `.xml` for `<`, `.zip` for `PK`, else `.json`.
    static func fileExtension(of input: Data) -> String {
        let first = input.first { ![UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")].contains($0) }
        if first == UInt8(ascii: "<") || input.starts(with: [0xEF, 0xBB, 0xBF, UInt8(ascii: "<")]) { return "xml" }
        if input.starts(with: [UInt8(ascii: "P"), UInt8(ascii: "K")]) { return "zip" }
        return "json"
    }

    @Test func theCorpusHasTheKnownAttacks() {
        #expect(Self.inputs.filter { $0.hasPrefix("attacks/") }.count >= 8, "\(Self.inputs)")
    }

    @Test(arguments: inputs)
    func anInputIsRefusedOrImportedAndNeverCrashes(_ name: String) async throws {
        let folder = try TemporaryFolder()
        let examples = Self.corpus.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("schemas/examples")
        let database = folder.file("device.sqlite")
        let seeded = try await Outpost.run(["import", examples.appendingPathComponent("project-bundle.xml").path, "--db", database])
        #expect(seeded.status == 0, "\(seeded.errorOutput)")
        let before = try content(database)

        let input = try Data(contentsOf: Self.corpus.appendingPathComponent(name))
        let file = folder.file("input.\(Self.fileExtension(of: input))")
        try input.write(to: URL(fileURLWithPath: file))
        let result = try await Outpost.run(["import", file, "--db", database])
        #expect(result.status == 0 || result.status == 1, "\(name): outpost import ended with \(result.status)")
        if result.status != 0 {
            #expect(!result.errorOutput.isEmpty, "\(name): refused without a message")
            #expect(try content(database) == before, "\(name): refused, but the database changed")
        }
        let queue = try DatabaseQueue(path: database)
        #expect(try await queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") } == ["ok"])
        try queue.close()
    }

    private func content(_ path: String) throws -> String {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            var lines: [String] = []
            for table in try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            {
                lines.append("== \(table)")
                lines += try Row.fetchAll(db, sql: "SELECT * FROM \"\(table)\"").map(\.description).sorted()
            }
            return lines.joined(separator: "\n")
        }
    }
}
