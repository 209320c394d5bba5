@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// A UTF-8 byte-order mark is what some editors and Windows tools put before a text file. The XML
/// reader took a marked bundle and the JSON reader refused one ("expected '{'"), so a file that crossed
/// such a tool imported in one format only (attack 128). The law, for both formats: a mark before the
/// document reads as the document without it; a mark anywhere else is refused, as any stray byte is.
@Suite(.fieldService) struct ByteOrderMarkTests {
    private static let mark: [UInt8] = [0xEF, 0xBB, 0xBF]

    private static func records(_ bytes: [UInt8], named name: String, in folder: URL) throws -> [EntityRecord] {
        let url = folder.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        let stream = try BundleImporter().open(url)
        var records: [EntityRecord] = []
        while let batch = try stream.nextBatch() { records += batch.map(\.record) }
        return records
    }

    @Test(arguments: ["xml", "json"])
    func aMarkBeforeTheDocumentReadsAsTheDocumentWithoutIt(format: String) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-mark-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let example = Array(try Data(contentsOf: RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.\(format)")))
        let plain = try Self.records(example, named: "plain.\(format)", in: folder)
        #expect(plain.count > 20)
        #expect(try Self.records(Self.mark + example, named: "marked.\(format)", in: folder) == plain)
        // Not after white space, nor twice: only the first bytes of a file may be a mark.
        for (name, bytes) in [("late", Array(" \n".utf8) + Self.mark + example), ("twice", Self.mark + Self.mark + example)] {
            #expect(throws: BundleError.self, "\(format), a mark \(name)") {
                _ = try Self.records(bytes, named: "\(name).\(format)", in: folder)
            }
        }
    }
}
