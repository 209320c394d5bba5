@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// Export → import into an empty database → export again gives the same bundle, in both encodings, and
/// both encodings import to identical databases.
@Suite(.fieldService) struct RoundTripTests {
    @Test(arguments: BundleFormat.allCases)
    func exportImportExportGivesTheSameBundle(format: BundleFormat) throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let first = workspace.url("first.\(format.rawValue)")
        let written = try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: first)
        #expect(written == SampleProject.records.count)

        let empty = try workspace.database("empty.sqlite")
        let summary = try LocalStore.open(at: empty).importBundle(at: first)
        #expect(summary.total.inserted == SampleProject.records.count)
        #expect(summary.total.orphaned == 0)

        let second = workspace.url("second.\(format.rawValue)")
        try LocalStore.open(at: empty).exportBundle(project: SampleProject.project, format: format, to: second)
        #expect(try Data(contentsOf: first) == Data(contentsOf: second))
        #expect(try workspace.contents(of: empty) == workspace.contents())
    }

    @Test func bothEncodingsImportToIdenticalDatabases() throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let xml = workspace.url("bundle.xml"), json = workspace.url("bundle.json")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .xml, to: xml)
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: json)
        let fromXML = try workspace.database("xml.sqlite"), fromJSON = try workspace.database("json.sqlite")
        try LocalStore.open(at: fromXML).importBundle(at: xml)
        try LocalStore.open(at: fromJSON).importBundle(at: json)
        let contents = try workspace.contents(of: fromXML)
        #expect(contents.count == SampleProject.records.count)
        #expect(contents == (try workspace.contents(of: fromJSON)))
    }

    @Test(arguments: BundleFormat.allCases)
    func theExamplesValidateAndMatchTheExporter(format: BundleFormat) throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let exported = workspace.url("sample.\(format.rawValue)")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: exported)
        let example = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.\(format.rawValue)")
        if !FileManager.default.fileExists(atPath: example.path) {
            try FileManager.default.createDirectory(at: example.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: exported, to: example)
        }
        #expect(BundleValidator().errors(inBundleAt: example).isEmpty)
        #expect(try Data(contentsOf: example) == Data(contentsOf: exported), "schemas/examples drifted from the exporter")
    }
}
