@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// The validator compiles `bundle.xsd` without its `uuid` and `timestamp` patterns, and the reader checks
/// those values itself (`LibXML.validatingXSD` says why). The law: a bundle the published schema refuses
/// for such a value is refused, by the validator and by the import's stream; and one it accepts, with the
/// value standing for the same id or instant, is accepted. Walked over every id and instant of the example
/// bundle, attributes and fields alike, with seeded edits of one character or of their case.
@Suite(.fieldService) struct ValuePatternTests {
    /// An id or instant in the example document: where its text starts and ends.
    private struct Slot {
        let range: Range<String.Index>
        let isInstant: Bool
    }

    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// Every attribute value and element text of the example that is an id or an instant.
    private static func slots(in text: String) throws -> [Slot] {
        let uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        let instant = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"
        var slots: [Slot] = []
        for (pattern, isInstant) in [(uuid, false), (instant, true)] {
            let expression = try NSRegularExpression(pattern: "(?<=[\">])\(pattern)(?=[\"<])")
            for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range, in: text) else { continue }
                slots.append(Slot(range: range, isInstant: isInstant))
            }
        }
        return slots
    }

    /// One seeded edit of `value`: a character replaced, dropped or added, or the case changed.
    private static func edit(_ value: String, using random: inout SeededGenerator) -> String {
        let pieces: [Character] = ["g", "G", "z", "Z", "t", " ", "-", ":", ".", "0", "9", "a", "F", "T", "é", "\u{9}"]
        var characters = Array(value)
        switch Int.random(in: 0..<6, using: &random) {
        case 0, 1: characters[Int.random(in: 0..<characters.count, using: &random)] = pieces.randomElement(using: &random)!
        case 2: characters.remove(at: Int.random(in: 0..<characters.count, using: &random))
        case 3: characters.insert(pieces.randomElement(using: &random)!, at: Int.random(in: 0...characters.count, using: &random))
        case 4: return value.uppercased()
        default: return value.lowercased().replacingOccurrences(of: ".", with: ".\(Int.random(in: 0..<10, using: &random))")
        }
        return String(characters)
    }

    @Test("An id or instant is refused exactly when the published schema refuses it or it names no real one", arguments: [1, 2])
    func idsAndInstantsAreHeldToThePublishedPatterns(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-patterns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let text = Self.example
        let slots = try Self.slots(in: text)
        #expect(slots.count > 40, "the example has ids and instants in attributes and fields")
        #expect(try LibXMLCheck.errors(validating: text, against: BundleSchema.xsd).isEmpty)
        var random = SeededGenerator(seed: seed)
        var refusedByThePattern = 0, sameValue = 0
        for round in 0..<160 {
            let slot = slots[Int.random(in: 0..<slots.count, using: &random)]
            let original = String(text[slot.range])
            let edited = Self.edit(original, using: &random)
            guard edited != original else { continue }
            let document = text.replacingCharacters(in: slot.range, with: edited)
            let url = folder.appendingPathComponent("edited-\(round).xml")
            try Data(document.utf8).write(to: url)
            let published = try LibXMLCheck.errors(validating: document, against: BundleSchema.xsd).isEmpty
            let ours = BundleValidator().errors(inBundleAt: url)
            let streamed = Result { () throws -> Int in
                let stream = try BundleImporter().open(url)
                var count = 0
                while let batch = try stream.nextBatch() { count += batch.count }
                return count
            }
            let value: AnyHashable? = slot.isInstant ? Timestamp.date(from: edited) : UUID(hyphenatedText: edited)
            let originalValue: AnyHashable? = slot.isInstant ? Timestamp.date(from: original) : UUID(hyphenatedText: original)
            if !published {
                refusedByThePattern += 1
                #expect(ours.contains { $0.code == .schemaViolation }, "\(original) → \(edited): \(ours)")
                #expect((try? streamed.get()) == nil, "\(original) → \(edited) was imported")
                if case .failure(let error as BundleError) = streamed {
                    #expect(error.code == .schemaViolation && error.line != nil, "\(error)")
                }
            } else if value == nil {
                // The pattern holds but it names no real instant (month 19, say): the catalog refuses it.
                #expect(slot.isInstant && !ours.isEmpty, "\(original) → \(edited): \(ours)")
            } else if value == originalValue {
                sameValue += 1
                #expect(ours.isEmpty, "\(original) → \(edited): \(ours)")
                #expect((try? streamed.get()) != nil, "\(original) → \(edited) was refused")
            }
            // Another id or instant altogether is a bundle of its own, held to the catalog's other rules.
        }
        #expect(refusedByThePattern > 60 && sameValue > 10, "\(refusedByThePattern) refused, \(sameValue) the same value")
    }
}
