@testable import OutpostBundles
@testable import OutpostStore
import OutpostConflicts
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing

/// A bundle file's records are its holder's word until a read of their whole project confirms them
/// (`RereadProjects`): only a read that began after the import settles them, only for the projects it
/// read, and a record the read brought stays.
@Suite(.fieldService) struct RereadProjectsTests {
    static let planted = SampleProject.id(900)

    /// A fresh device that imported the sample project's bundle file with one issue the server never had.
    func importedDevice() throws -> (Workspace, LocalStore, URL) {
        let workspace = try Workspace()
        let url = workspace.url("file.json")
        let extra = Issue(id: Self.planted, sync: SampleProject.sync(10, version: 3), projectID: SampleProject.project, title: "PLANTED").record
        try BundleExporter().export(project: SampleProject.project, records: SampleProject.records + [extra], format: .json, to: url)
        let store = try LocalStore.open(at: workspace.databasePath)
        try store.importBundle(at: url)
        return (workspace, store, url)
    }

    /// The server's page naming the project back, with every sample record as the server holds it.
    func serverPage(rereading projects: [UUID]) -> PulledPage {
        let stamp = HybridTimestamp(physicalMilliseconds: 1_800_000_000_000, counter: 0, node: NodeID(9))
        return PulledPage(
            changes: SampleProject.records.map { VersionedRecord(record: $0, stampedAt: stamp) }, cursor: "c",
            sentRereadProjects: projects)
    }

    @Test func aFileImportAsksForItsProjectAndAServerImportDoesNot() throws {
        let (workspace, store, url) = try importedDevice()
        #expect(try store.rereadProjects() == [SampleProject.project])
        let other = try LocalStore.open(at: workspace.url("other.sqlite").path)
        try other.importBundle(at: url, fromServer: true)
        #expect(try other.rereadProjects().isEmpty, "a bundle from the device's own server is the server's word")
    }

    @Test func aReadThatBeganBeforeAnImportSettlesNothingOfIt() async throws {
        let (workspace, store, url) = try importedDevice()
        defer { withExtendedLifetime(workspace) {} }  // its folder goes with it
        let first = try await store.applyPulledPage(serverPage(rereading: [SampleProject.project]))
        // Some sample records do not fit what a pull takes in: the read brought them all the same.
        #expect(first.quarantined > 0)
        #expect(try store.rereadProjects().isEmpty)
        // The file imported again while that read goes on: its records are not the read's to judge.
        try store.importBundle(at: url)
        #expect(try store.rereadProjects() == [SampleProject.project])
        let early = try await store.settleRereadImports(asked: nil)
        #expect(early == HistoryRebuildReport())
        #expect(try store.record(.issue, id: Self.planted) != nil)

        // A read that began after it, asked for other projects only, settles nothing either.
        _ = try await store.applyPulledPage(serverPage(rereading: [SampleProject.project]))
        #expect(try await store.settleRereadImports(asked: [SampleProject.id(901)]) == HistoryRebuildReport())
        // Once it covers the project: the planted issue goes, the records the server sent stay, those
        // quarantined too.
        let settled = try await store.settleRereadImports(asked: nil)
        #expect(settled.removed == 1 && settled.recreated == 0, "\(settled)")
        #expect(try store.record(.issue, id: Self.planted) == nil)
        for record in SampleProject.records { #expect(try store.record(record.entity, id: record.id) != nil) }
        #expect(try store.verifyAudit().isIntact)
        #expect(try await store.settleRereadImports(asked: nil) == HistoryRebuildReport(), "settled once")
    }

    @Test func aServerThatDoesNotNameTheProjectBackSettlesNothing() async throws {
        let (workspace, store, _) = try importedDevice()
        defer { withExtendedLifetime(workspace) {} }  // its folder goes with it
        _ = try await store.applyPulledPage(serverPage(rereading: []))
        #expect(try await store.settleRereadImports(asked: nil) == HistoryRebuildReport())
        #expect(try store.record(.issue, id: Self.planted) != nil)
        #expect(try store.rereadProjects() == [SampleProject.project], "asked for again by the next pull")
    }
}
