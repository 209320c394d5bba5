@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// `bundle.schema.json` is JSON Schema 2020-12, whose `integer` is any number with a zero fraction:
/// `"sortOrder": 1.0` and `1e2` validate, and the reader refused them (attack 124, F4). The law, over
/// seeded spellings of each integer of the example bundle (its format version, a record's version, an
/// integer field): a spelling of the same whole number imports as that number, read exactly from its
/// digits; one with a fraction is refused, naming where.
@Suite(.fieldService) struct JSONWholeNumberTests {
    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.json")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// `value` written another way: with a zero fraction, an exponent, or both; or with a fraction that
    /// is not zero. Returns the text and whether it is the same whole number.
    private static func spelling(of value: Int64, using random: inout SeededGenerator) -> (text: String, whole: Bool) {
        let digits = String(value)
        switch Int.random(in: 0..<7, using: &random) {
        case 0: return ("\(digits).0", true)
        case 1: return ("\(digits).000", true)
        case 2: return ("\(digits)e0", true)
        case 3: return ("\(digits)0E-1", true)
        case 4: return ("0.\(digits)e+\(digits.count)", true)
        case 5: return ("\(digits).5", false)
        default: return ("\(digits)00e-2", true)
        }
    }

    @Test(arguments: [1, 2])
    func wholeNumbersReadAsTheNumberTheyWrite(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-whole-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // Each target: the text as it stands in the example, the number it writes, and how to find it read.
        let targets: [(original: String, value: Int64, respell: (String) -> String, read: ([EntityRecord]) -> Int64?)] = [
            ("\"formatVersion\": 2,", 2, { "\"formatVersion\": \($0)," }, { _ in 2 }),
            ("\"estimatedValueCents\": 4250000}", 4_250_000, { "\"estimatedValueCents\": \($0)}" },
             { records in records.first { $0.entity == .opportunity }.flatMap { if case .integer(let n) = $0["estimatedValueCents"] { n } else { nil } } }),
            ("\"serverID\": \"srv-1\", \"version\": 1,", 1, { "\"serverID\": \"srv-1\", \"version\": \($0)," },
             { records in records.first { $0.entity == .opportunity }.map { Int64($0.sync.version) } }),
        ]
        var random = SeededGenerator(seed: seed)
        var read = 0, refused = 0
        for round in 0..<60 {
            let target = targets[round % targets.count]
            let (text, whole) = Self.spelling(of: target.value, using: &random)
            #expect(Self.example.contains(target.original))
            let document = Self.example.replacingOccurrences(of: target.original, with: target.respell(text))
            let url = folder.appendingPathComponent("whole-\(round).json")
            try Data(document.utf8).write(to: url)
            let outcome = Result { () throws(BundleError) -> [EntityRecord] in
                let stream = try BundleImporter().open(url)
                var records: [EntityRecord] = []
                while let batch = try stream.nextBatch() { records += batch.map(\.record) }
                return records
            }
            let validated = BundleValidator().errors(inBundleAt: url)
            switch outcome {
            case .success(let records):
                #expect(whole, "\(text) has a fraction and was read")
                #expect(target.read(records) == target.value, "\(text)")
                #expect(validated.isEmpty, "\(text): \(validated)")
                read += 1
            case .failure(let error):
                #expect(!whole, "\(text) writes \(target.value) and was refused: \(error)")
                #expect(error.line != nil && !validated.isEmpty, "\(text): \(error)")
                refused += 1
            }
        }
        #expect(read > 30 && refused > 5, "\(read) read, \(refused) refused")
    }
}
