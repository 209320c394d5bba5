@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// libxml2 hands a value over in pieces: one per predefined entity, per character reference, per CDATA
/// section, and the text between them. Its schema validator appended each piece to the value so far
/// with `xmlStrncat`, which measures the whole value again: a 1 MB value spelled as a million `&amp;`
/// took 14.5 s to import (attack 127, F3), quadratic in the number of pieces. The law, walked over every
/// spelling: a value of a million pieces reads back as its text, in time linear in its size (well
/// under the seconds the quadratic cost took, on a loaded host and a debug build).
@Suite(.fieldService) struct XMLTextRunTests {
    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()
    private static let opportunity = UUID(uuidString: "0b5e55ed-0000-4000-8000-000000000001")!

    /// The example's opportunity as the import's stream reads it from `url`, reading the whole document.
    private static func opportunity(readFrom url: URL) throws -> EntityRecord? {
        let stream = try BundleImporter().open(url)
        var read: EntityRecord?
        while let batch = try stream.nextBatch() {
            read = read ?? batch.map(\.record).first { $0.id == opportunity }
        }
        return read
    }

    /// Each spelling of `&`, and one that mixes them.
    static let spellings: [(name: String, pieces: @Sendable (Int) -> String)] = [
        ("a predefined entity", { _ in "&amp;" }),
        ("a decimal reference", { _ in "&#38;" }),
        ("a hexadecimal reference", { _ in "&#x26;" }),
        ("a CDATA section", { _ in "<![CDATA[&]]>" }),
        ("every spelling in turn, with literal text between", { ["&amp;", "a", "&#38;", "<![CDATA[&]]>", "&#x26;"][$0 % 5] }),
        // Attack 129 F1: each empty section flushed the run joined so far, a million pieces again.
        ("an empty CDATA section before each entity", { _ in "<![CDATA[]]>&amp;" }),
    ]

    @Test("A value of a million pieces reads back whole, in time linear in its size", arguments: 0..<6)
    func aValueOfAMillionPiecesReadsInLinearTime(spelling: Int) throws {
        let (name, piece) = Self.spellings[spelling]
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-text-runs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let customer = "<customerName>Zoë Müller</customerName>"
        #expect(Self.example.contains(customer))
        let count = 1_000_000
        var spelled = "", text = ""
        spelled.reserveCapacity(count * 13)
        for index in 0..<count {
            let written = piece(index)
            spelled += written
            text += written == "a" ? "a" : "&"
        }
        let url = folder.appendingPathComponent("pieces.xml")
        try Data(Self.example.replacingOccurrences(of: customer, with: "<customerName>\(spelled)</customerName>").utf8).write(to: url)
        let clock = ContinuousClock()
        let started = clock.now
        let read = try Self.opportunity(readFrom: url)
        let took = clock.now - started
        #expect(read?["customerName"] == .text(text), "\(name)")
        // Linear, this reads in well under a second; the quadratic cost took 14.5 s for the entity.
        #expect(took < .seconds(5), "\(name): \(took)")
    }

    /// Pieces of a run and the text each stands for, in a field or between two fields (where only white
    /// space written as text may stand).
    private static let pieces: [(spelled: String, text: String)] = [
        (" ", " "), ("\n", "\n"), ("&#32;", " "), ("&#10;", "\n"), ("<![CDATA[ ]]>", " "), ("<![CDATA[]]>", ""),
        ("x", "x"), ("&amp;", "&"), ("<!-- c -->", ""), ("<![CDATA[<&>]]>", "<&>"),
    ]

    /// The joining changes no verdict and no value: runs of up to a few thousand pieces, past the ones
    /// that go on unjoined, in a field and between two fields, read as libxml2's tree validation of the
    /// same document judges them, and a field accepted holds exactly the text spelled.
    @Test("Runs of pieces read with the verdict and the value libxml2's tree validation gives", arguments: 1...6)
    func runsOfPiecesKeepTheirVerdictAndValue(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-text-verdicts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let field = "<name>Kitchen remodel</name>"
        #expect(Self.example.contains(field))
        var random = SeededGenerator(seed: seed)
        var accepted = 0, refused = 0
        for round in 0..<40 {
            func run() -> (spelled: String, text: String) {
                let count = [1, 7, 8, 9, Int.random(in: 10...3_000, using: &random)].randomElement(using: &random)!
                // Mostly white space, so that a run between fields is often allowed.
                let choices = Bool.random(using: &random) ? Array(Self.pieces.prefix(4)) : Self.pieces
                var spelled = "", text = ""
                for _ in 0..<count {
                    let piece = choices.randomElement(using: &random)!
                    spelled += piece.spelled
                    text += piece.text
                }
                return (spelled, text)
            }
            let (inside, between) = (run(), run())
            let document = Self.example.replacingOccurrences(of: field, with: "<name>x\(inside.spelled)</name>\(between.spelled)")
            let url = folder.appendingPathComponent("run-\(round).xml")
            try Data(document.utf8).write(to: url)
            let valid = try LibXMLCheck.errors(validating: document, against: BundleSchema.xsd).isEmpty
            do {
                let read = try Self.opportunity(readFrom: url)
                #expect(valid, "seed \(seed), round \(round): read a document libxml2 refuses")
                #expect(read?["name"] == .text("x" + inside.text), "seed \(seed), round \(round)")
                accepted += 1
            } catch {
                #expect(!valid, "seed \(seed), round \(round): refused a document libxml2 validates: \(error)")
                refused += 1
            }
        }
        // Both verdicts are walked.
        #expect(accepted > 5 && refused > 5, "accepted \(accepted), refused \(refused)")
    }
}
