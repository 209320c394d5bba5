@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// XML has many spellings of one text: a literal character, a predefined entity, a decimal or
/// hexadecimal character reference, and in element content a CDATA section. The reader (libxml2's SAX
/// parser, which hands an `&` in an attribute over as the text `&#38;` for a tree builder to undo) must
/// read each as the text it stands for, in an attribute and in a field, wherever the value falls
/// against the 64 KB chunks the document is pushed in. The law, walked over seeded texts and spellings:
/// the record read holds exactly the text spelled, and libxml2 validates the same document.
@Suite(.fieldService) struct XMLSpellingTests {
    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    private static let opportunity = UUID(uuidString: "0b5e55ed-0000-4000-8000-000000000001")!
    private static let alphabet: [Unicode.Scalar] = ["a", "Z", "7", " ", "&", "<", ">", "\"", "'", "é", "€", "😀", "#", ";"]

    /// The records the import's stream reads from `url`.
    private static func records(at url: URL) throws -> [EntityRecord] {
        let stream = try BundleImporter().open(url)
        var records: [EntityRecord] = []
        while let batch = try stream.nextBatch() { records += batch.map(\.record) }
        return records
    }

    /// One scalar spelled one of the ways XML allows it where it stands.
    private static func spell(_ scalar: Unicode.Scalar, inAttribute: Bool, using random: inout SeededGenerator) -> String {
        let references = ["&#\(scalar.value);", "&#x\(String(scalar.value, radix: 16, uppercase: Bool.random(using: &random)));"]
        var ways: [String]
        switch scalar {
        case "&": ways = ["&amp;"]
        case "<": ways = ["&lt;"]
        case ">": ways = [">", "&gt;"]
        case "\"": ways = inAttribute ? ["&quot;"] : ["\"", "&quot;"]
        case "'": ways = ["'", "&apos;"]
        default: ways = [String(scalar)]
        }
        ways += references
        return ways.randomElement(using: &random)!
    }

    /// `text` spelled scalar by scalar; in element content, a run of it now and then as a CDATA section.
    private static func spelled(_ text: String, inAttribute: Bool, using random: inout SeededGenerator) -> String {
        var result = "", scalars = Array(text.unicodeScalars)[...]
        while let first = scalars.first {
            if !inAttribute, Int.random(in: 0..<6, using: &random) == 0 {
                let run = scalars.prefix(Int.random(in: 1...8, using: &random))
                result += "<![CDATA[" + String(String.UnicodeScalarView(run)) + "]]>"
                scalars = scalars.dropFirst(run.count)
            } else {
                result += spell(first, inAttribute: inAttribute, using: &random)
                scalars = scalars.dropFirst()
            }
        }
        return result
    }

    @Test("Every spelling of a text in an attribute and in a field reads back as that text, across chunk boundaries", arguments: [1, 2, 3])
    func everySpellingReadsBackAsItsText(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-spelling-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let serverID = "serverID=\"srv-1\"", customer = "<customerName>Zoë Müller</customerName>"
        #expect(Self.example.contains(serverID) && Self.example.contains(customer) && Self.example.contains("  <records>"))
        var random = SeededGenerator(seed: seed)
        for round in 0..<30 {
            var text = ""
            // Long now and then, so that the value itself spans a chunk's end.
            let length = Int.random(in: 0..<4, using: &random) == 0 ? Int.random(in: 2_000...12_000, using: &random) : Int.random(in: 1...40, using: &random)
            for _ in 0..<length { text.unicodeScalars.append(Self.alphabet.randomElement(using: &random)!) }
            // A comment of seeded length before the records moves both values against the 64 KB chunks.
            let padding = "  <!--" + String(repeating: "p", count: Int.random(in: 0..<140_000, using: &random)) + "-->\n"
            let document = Self.example
                .replacingOccurrences(of: serverID, with: "serverID=\"\(Self.spelled(text, inAttribute: true, using: &random))\"")
                .replacingOccurrences(of: customer, with: "<customerName>\(Self.spelled(text, inAttribute: false, using: &random))</customerName>")
                .replacingOccurrences(of: "  <records>", with: padding + "  <records>")
            #expect(try LibXMLCheck.errors(validating: document, against: BundleSchema.xsd).isEmpty, "seed \(seed), round \(round)")
            let url = folder.appendingPathComponent("spelled-\(round).xml")
            try Data(document.utf8).write(to: url)
            let read = try Self.records(at: url).first { $0.id == Self.opportunity }
            #expect(read?.sync.serverID == text, "seed \(seed), round \(round): serverID \(read?.sync.serverID?.prefix(60).debugDescription ?? "nil")")
            #expect(read?["customerName"] == .text(text), "seed \(seed), round \(round)")
        }
    }
}
