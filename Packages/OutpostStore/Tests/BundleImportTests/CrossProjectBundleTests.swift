@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// A bundle carries one project, the one its header names. A record of another project (by its own
/// fields, or as the device holds it or its parent) is refused by validation where the bundle alone
/// tells, and by import always, which then writes nothing: a bundle can never overwrite, or hang
/// records under, another project's synced records.
@Suite(.fieldService) struct CrossProjectBundleTests {
    static let otherProject = SampleProject.id(500)
    static let otherIssue = SampleProject.id(501)

    /// Project P1 and its issue, synced on the device beside the sample project D.
    static var otherProjectsRecords: [EntityRecord] {
        [
            Project(id: otherProject, sync: SampleProject.sync(2), name: "Other job", address: "1 Oak St", status: .active).record,
            Issue(id: otherIssue, sync: SampleProject.sync(10), projectID: otherProject, title: "Cracked tile").record,
        ]
    }

    /// A device holding D and P1, and the bundle of D's header carrying `extra` after D's records.
    func device(bundling extra: [EntityRecord], _ format: BundleFormat) throws -> (Workspace, URL) {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records + Self.otherProjectsRecords)
        let url = workspace.url("hostile.\(format.rawValue)")
        try BundleExporter().export(project: SampleProject.project, records: SampleProject.records + extra, format: format, to: url)
        return (workspace, url)
    }

    /// Imports `url`, expecting it refused as a record outside the header's project naming `id` and
    /// both projects, with the database unchanged.
    func expectImportRefused(_ workspace: Workspace, _ url: URL, entity: EntityType, id: UUID, project: UUID) throws {
        let store = try LocalStore.open(at: workspace.databasePath)
        let before = try workspace.snapshot()
        let error = try #require(throws: BundleError.self) { try store.importBundle(at: url) }
        #expect(error.code == .outsideProject, "\(error)")
        #expect(error.entity == entity && error.id == id, "\(error)")
        #expect(error.message.contains(project.lowercasedText), "\(error)")
        #expect(error.message.contains(SampleProject.project.lowercasedText), "\(error)")
        #expect(try workspace.snapshot() == before, "the import wrote something")
    }

    /// The attack: a bundle of D carrying P1's issue at version 99. Validation reports it, and the import
    /// refuses it whole: P1's synced issue keeps its content and version, so the next sync still pulls.
    @Test(arguments: [BundleFormat.xml, .json])
    func aRecordOfAnotherProjectIsRefusedByValidationAndImport(_ format: BundleFormat) throws {
        var hijack = Issue(id: Self.otherIssue, sync: SampleProject.sync(10, version: 99), projectID: Self.otherProject, title: "HIJACK").record
        hijack.sync.serverID = "srv-hijack"
        let (workspace, url) = try device(bundling: [hijack], format)
        let errors = BundleValidator().errors(inBundleAt: url)
        #expect(errors.count == 1, "\(errors)")
        let error = try #require(errors.first)
        #expect(error.code == .outsideProject && error.entity == .issue && error.id == Self.otherIssue, "\(error)")
        #expect(error.message.contains(Self.otherProject.lowercasedText) && error.message.contains(SampleProject.project.lowercasedText), "\(error)")
        try expectImportRefused(workspace, url, entity: .issue, id: Self.otherIssue, project: Self.otherProject)
        let kept = try #require(try workspace.record(.issue, Self.otherIssue))
        #expect(kept["title"] == .text("Cracked tile") && kept.sync.version == 1)
    }

    /// Another project's scope record, and a member naming a project that is not the header's (one the
    /// device has never seen): refused, not counted as orphaned.
    @Test func aProjectRecordOrAMemberOfAnotherProjectIsRefused() throws {
        let stranger = SampleProject.id(600)
        let member = Member(id: SampleProject.id(601), sync: SampleProject.sync(3), projectID: stranger, userID: SampleProject.id(902),
            name: "Eve", role: .foreman).record
        let project = Project(id: stranger, sync: SampleProject.sync(2), name: "Stranger's job").record
        for (record, format) in [(member, BundleFormat.json), (project, .xml)] {
            let (workspace, url) = try device(bundling: [record], format)
            let errors = BundleValidator().errors(inBundleAt: url)
            #expect(errors.map(\.code) == [.outsideProject] && errors.first?.id == record.id, "\(errors)")
            try expectImportRefused(workspace, url, entity: record.entity, id: record.id, project: stranger)
        }
    }

    /// What only the device can tell: a record it holds in P1, relabelled as D's in the bundle, and a
    /// new comment under P1's issue. The import refuses both, writing nothing.
    @Test func aRecordOrAParentTheDeviceHoldsInAnotherProjectIsRefused() throws {
        let relabelled = Issue(id: Self.otherIssue, sync: SampleProject.sync(10, version: 99), projectID: SampleProject.project,
            title: "HIJACK").record
        let comment = Comment(id: SampleProject.id(502), sync: SampleProject.sync(13), issueID: Self.otherIssue,
            authorID: SampleProject.foreman, body: "planted").record
        for record in [relabelled, comment] {
            let (workspace, url) = try device(bundling: [record], .json)
            try expectImportRefused(workspace, url, entity: record.entity, id: record.id, project: Self.otherProject)
        }
    }

    /// A record of D that only refers to a record the device holds in P1 (an issue's asset, not the
    /// parent it belongs through) stays D's, as a pull stores it. A member who cannot see P1 may push
    /// such a reference (the server answers it as it answers an id that does not exist), and a refusal
    /// here let one crew member stop every device that also holds P1 from pre-syncing D (attack
    /// finding 5 of stop 49).
    @Test(arguments: [BundleFormat.xml, .json])
    func aReferenceIntoAnotherProjectThatDoesNotPlaceTheRecordImports(_ format: BundleFormat) throws {
        let asset = Asset(id: SampleProject.id(503), sync: SampleProject.sync(11), projectID: Self.otherProject, name: "Pump", qrCode: "Q-1").record
        let pointing = Issue(id: SampleProject.id(504), sync: SampleProject.sync(14), projectID: SampleProject.project,
            title: "Refers to P1's pump", assetID: SampleProject.id(503)).record
        let workspace = try Workspace()
        try workspace.save(SampleProject.records + Self.otherProjectsRecords + [asset])
        let url = workspace.url("pointing.\(format.rawValue)")
        try BundleExporter().export(project: SampleProject.project, records: SampleProject.records + [pointing], format: format, to: url)
        #expect(BundleValidator().errors(inBundleAt: url).isEmpty)
        let summary = try LocalStore.open(at: workspace.databasePath).importBundle(at: url)
        #expect(summary.total.inserted == 1 && summary.total.orphaned == 0, "\(summary)")
        let stored = try #require(try workspace.record(.issue, SampleProject.id(504)))
        #expect(stored["assetID"] == .uuid(SampleProject.id(503)) && stored["projectID"] == .uuid(SampleProject.project))
        let held = try #require(try workspace.record(.asset, SampleProject.id(503)))
        #expect(held == asset, "the other project's asset changed")
    }

    /// A JSON bundle may name its project after its records: the records read before it are held to it
    /// all the same.
    @Test func aProjectNamedAfterTheRecordsStillScopesThem() throws {
        let hijack = Issue(id: Self.otherIssue, sync: SampleProject.sync(10, version: 99), projectID: Self.otherProject, title: "HIJACK").record
        let (workspace, url) = try device(bundling: [hijack], .json)
        let header = "  \"projectID\": \"\(SampleProject.project.lowercasedText)\",\n"
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(text.contains(header))
        let late = try workspace.file("late.json", String(text.replacingOccurrences(of: header, with: "").dropLast(3))
            + ",\n  \"projectID\": \"\(SampleProject.project.lowercasedText)\"\n}\n")
        let errors = BundleValidator().errors(inBundleAt: late)
        #expect(errors.map(\.code) == [.outsideProject] && errors.first?.id == Self.otherIssue, "\(errors)")
        try expectImportRefused(workspace, late, entity: .issue, id: Self.otherIssue, project: Self.otherProject)
    }

    /// The project's own bundle, the device's other project untouched, still imports.
    @Test func theProjectsOwnBundleStillImports() throws {
        let (workspace, url) = try device(bundling: [], .xml)
        #expect(BundleValidator().errors(inBundleAt: url).isEmpty)
        let target = try workspace.database("target.sqlite")
        let summary = try LocalStore.open(at: target).importBundle(at: url)
        #expect(summary.total.inserted == SampleProject.records.count && summary.total.orphaned == 0)
        let again = try LocalStore.open(at: workspace.databasePath).importBundle(at: url)
        #expect(again.total.unchanged == SampleProject.records.count)
    }
}
