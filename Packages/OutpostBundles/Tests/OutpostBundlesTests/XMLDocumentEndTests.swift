@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import Testing

/// How an XML bundle that is not all there is refused: an empty one says it is empty (libxml2 said
/// "Extra content at the end of the document" of an empty file, attack 127 F9), and one cut off anywhere
/// before its end is refused as malformed where it breaks, never read as fewer records.
@Suite(.fieldService) struct XMLDocumentEndTests {
    private static let example: [UInt8] = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? Array(Data(contentsOf: url))) ?? []
    }()

    /// The error reading `bytes` as a bundle ends with; nil if it reads whole.
    private static func refusal(of bytes: [UInt8], in folder: URL) throws -> BundleError? {
        let url = folder.appendingPathComponent("\(UUID().uuidString).xml")
        try Data(bytes).write(to: url)
        do throws(BundleError) {
            let stream = try BundleImporter().open(url)
            while try stream.nextBatch() != nil {}
            return nil
        }
        catch { return error }
    }

    private static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-ends-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test("A document with nothing in it is refused as empty", arguments: [
        "no byte", "white space", "a byte-order mark", "a byte-order mark and white space", "2,000 spaces",
    ])
    func anEmptyDocumentIsRefusedAsEmpty(holding content: String) throws {
        let bytes: [UInt8] = switch content {
        case "white space": Array(" \n\t\r\n".utf8)
        case "a byte-order mark": [0xEF, 0xBB, 0xBF]
        case "a byte-order mark and white space": [0xEF, 0xBB, 0xBF] + Array("  \n".utf8)
        case "2,000 spaces": [UInt8](repeating: 0x20, count: 2_000)
        default: []
        }
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = try #require(try Self.refusal(of: bytes, in: folder))
        #expect(error.code == .malformedXML)
        #expect(error.message.contains("empty"), "\(error)")
    }

    @Test("A document cut off anywhere before its end is refused as malformed, not read short", arguments: [1, 2])
    func aDocumentCutOffIsRefused(seed: UInt64) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let whole = Self.example
        #expect(try Self.refusal(of: whole, in: folder) == nil)
        let end = try #require(whole.firstRange(of: Array("</bundle>".utf8))).lowerBound
        let contentStart = try #require(whole.firstIndex(of: UInt8(ascii: "<")))
        var random = SeededGenerator(seed: seed)
        for _ in 0..<20 {
            let cut = Int.random(in: contentStart + 1..<end, using: &random)
            let error = try #require(try Self.refusal(of: Array(whole[..<cut]), in: folder), "cut at byte \(cut)")
            #expect(error.code == .malformedXML, "cut at byte \(cut): \(error)")
            #expect(!error.message.contains("Extra content"), "cut at byte \(cut): \(error)")
            #expect(error.line != nil, "cut at byte \(cut): \(error)")
        }
    }
}
