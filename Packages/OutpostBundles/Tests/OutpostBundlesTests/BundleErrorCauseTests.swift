@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// A `BundleError` keeps the error that caused it as a value, not only as text.
@Suite(.fieldService) struct BundleErrorCauseTests {
    @Test func anArchiveThatCannotBeWrittenKeepsTheFileSystemsError() throws {
        // A destination inside a regular file: no folder can be made there, whoever runs the test.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-cause-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let notAFolder = folder.appendingPathComponent("plain-file")
        try Data("not a folder".utf8).write(to: notAFolder)
        let destination = notAFolder.appendingPathComponent("project.zip")
        let error = try #require(throws: BundleError.self) {
            try BundleExporter().exportArchive(project: UUID(), records: [], files: [], format: .json, to: destination)
        }
        #expect(error.code == .unreadableFile)
        let cause = try #require(error.underlying, "no cause kept")
        #expect(cause is CocoaError, "the cause is \(type(of: cause)): \(cause)")
        #expect(error.message.contains("\(cause)"), "the message keeps the cause's text")
    }

    @Test func aRecordBreakingARuleKeepsTheCatalogsError() throws {
        let example = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.json")
        var text = try String(contentsOf: example, encoding: .utf8)
        let name = try #require(text.range(of: #""name": ""#))
        let end = try #require(text[name.upperBound...].firstIndex(of: "\""))
        text.replaceSubrange(name.upperBound..<end, with: "  ")
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-cause-\(UUID().uuidString).json")
        try Data(text.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let error = try #require(throws: BundleError.self) {
            let stream = try BundleImporter().open(url)
            while try stream.nextBatch(maximum: 50) != nil {}
        }
        #expect(error.code == .invalidRecord)
        let cause = try #require(error.underlying as? ModelError, "the cause is \(String(describing: error.underlying))")
        #expect(cause.code == .emptyRequiredField)
        #expect(cause.entity == error.entity && cause.field == error.field)
    }
}
