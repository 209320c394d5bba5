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

/// Text every JSON bundle can carry but XML 1.0 cannot: the XML export refuses it by name and leaves
/// no file; the JSON export carries it back exactly. The writers escape by scanning bytes, so the
/// awkward characters sit among plain and multi-byte ones, in a field and in an attribute (serverID).
@Suite(.fieldService) struct UnrepresentableTextTests {
    @Test func xmlRefusesWhatItCannotHoldAndJSONCarriesItBack() throws {
        let workspace = try Workspace()
        let awkward = "tab\there \"quoted\" back\\slash <a> & ]]> \u{1}\u{1F}\u{7F} é 😀 \u{FFFD}"
        var issue = Issue(
            id: SampleProject.id(52), sync: SampleProject.sync(12), projectID: SampleProject.project, title: awkward
        ).record
        issue.sync.serverID = "srv \"7\" <&>"
        try workspace.save(SampleProject.records + [issue])
        let store = try LocalStore.open(at: workspace.databasePath)

        let xml = workspace.url("awkward.xml")
        #expect {
            try store.exportBundle(project: SampleProject.project, format: .xml, to: xml)
        } throws: { error in
            guard let error = error as? BundleError else { return false }
            return error.code == .notRepresentable && error.id == issue.id && error.field == "title"
                && error.message.contains("U+1 ")
        }
        #expect(!FileManager.default.fileExists(atPath: xml.path))

        let json = workspace.url("awkward.json")
        try store.exportBundle(project: SampleProject.project, format: .json, to: json)
        let empty = try workspace.database("empty.sqlite")
        try LocalStore.open(at: empty).importBundle(at: json)
        let back = try #require(try workspace.record(.issue, issue.id, in: empty))
        #expect(back["title"] == .text(awkward))
        #expect(back.sync.serverID == "srv \"7\" <&>")
    }
}
