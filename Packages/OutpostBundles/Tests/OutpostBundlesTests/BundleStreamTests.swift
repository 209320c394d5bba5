@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// `BundleImporter.open` reads a bundle as a stream of checked records, with no database anywhere.
@Suite(.fieldService) struct BundleStreamTests {
    private func drain(_ url: URL, batch: Int = 7) throws -> (records: [EntityRecord], stream: BundleRecordStream) {
        let stream = try BundleImporter().open(url)
        var records: [EntityRecord] = []
        while let next = try stream.nextBatch(maximum: batch) {
            #expect(next.count <= batch && !next.isEmpty)
            records += next.map(\.record)
        }
        return (records, stream)
    }

    @Test("Both encodings of the example bundle stream the same records, in batches, with the header's project")
    func examplesStreamAlike() throws {
        let xml = try drain(RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml"))
        let json = try drain(RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.json"), batch: 3)
        #expect(!xml.records.isEmpty)
        #expect(xml.records == json.records)
        #expect(xml.stream.projectID != nil && xml.stream.projectID == json.stream.projectID)
        #expect(xml.stream.format == .xml && json.stream.format == .json)
        #expect(xml.stream.bytesRead == xml.stream.totalBytes)
        #expect(try xml.stream.nextBatch() == nil, "the end stays the end")
    }

    @Test("A record breaking one of the catalog's rules ends the stream with an error that says where")
    func ruleBreakingRecordIsLocated() throws {
        let example = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.json")
        var text = try String(contentsOf: example, encoding: .utf8)
        // A project's name is required text: blank breaks the catalog's rule, not the schema.
        let name = try #require(text.range(of: #""name": ""#))
        let end = try #require(text[name.upperBound...].firstIndex(of: "\""))
        text.replaceSubrange(name.upperBound..<end, with: "  ")
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-stream-\(UUID().uuidString).json")
        try Data(text.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let error = try #require(throws: BundleError.self) { try drain(url) }
        #expect(error.code == .invalidRecord)
        #expect(error.file == url.path && error.jsonPath != nil)
    }

    /// An attack found CDATA sections dropped: `<details><![CDATA[<b>bold</b> & stuff]]></details>` passed
    /// validation and imported as "", and a title of CDATA alone was refused as empty. CDATA is XML text.
    @Test("Text in CDATA sections is read as the text it is, alone or between plain text")
    func cdataIsText() throws {
        let example = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        let text = try String(contentsOf: example, encoding: .utf8)
            .replacingOccurrences(of: "<name>Kitchen remodel</name>", with: "<name>Kitchen<![CDATA[ <b>&</b> ]]>remodel</name>")
            .replacingOccurrences(of: "<name>Müller kitchen</name>", with: "<name><![CDATA[Müller & kitchen]]></name>")
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-cdata-\(UUID().uuidString).xml")
        try Data(text.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let names = try drain(url).records.compactMap { record -> String? in
            guard case .text(let name) = record["name"] else { return nil }
            return name
        }
        #expect(names.contains("Kitchen <b>&</b> remodel"), "\(names)")
        #expect(names.contains("Müller & kitchen"), "\(names)")
    }
}
