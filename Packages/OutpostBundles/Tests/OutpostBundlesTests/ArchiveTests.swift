import Foundation
import OutpostModels
import OutpostStore
import OutpostWire
import Testing
import ZIPFoundation
@testable import OutpostBundles

/// Zip bundles end to end: the files they ship are stored for the device (only once the records
/// commit), and a device exports what it holds as a zip that imports elsewhere and exports again to the
/// same bytes.
@Suite struct ArchiveTests {
    /// Files in `<database>.files/`, hidden working folders included.
    static func storedNames(_ databasePath: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: databasePath + ".files")) ?? []).sorted()
    }

    @Test func aZipImportStoresItsFilesOnceByDigest() throws {
        let corpus = try HostileBundleTests.Corpus()
        let url = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        let database = try corpus.workspace.database("device.sqlite")

        let first = try BundleImporter().importBundle(at: url, intoDatabaseAt: database)
        #expect(first.filesVerified == 1)
        #expect(first.filesStored == 1)
        let stored = try #require(BundleImporter.storedFile(sha256: SampleProject.drawingDigest, forDatabaseAt: database))
        #expect(try Data(contentsOf: stored) == Data("test".utf8))
        #expect(Self.storedNames(database) == [SampleProject.drawingDigest])

        let second = try BundleImporter().importBundle(at: url, intoDatabaseAt: database)
        #expect(second.filesVerified == 1)
        #expect(second.filesStored == 0)
        #expect(BundleImporter.storedFile(sha256: "not-a-digest/../../etc", forDatabaseAt: database) == nil)
    }

    @Test func aFailedZipImportStoresNoFile() throws {
        let corpus = try HostileBundleTests.Corpus()
        // The first listed file is good, the second lies about its bytes: the import fails after copying one.
        let manifest = String(decoding: corpus.manifestWithFile, as: UTF8.self).replacingOccurrences(
            of: "  </files>",
            with: "    <file name=\"docs/B.pdf\" byteSize=\"4\" sha256=\"\(String(repeating: "ab", count: 32))\"/>\n  </files>")
        let url = try corpus.zip("bad.zip", [
            ("bundle.xml", Data(manifest.utf8)), ("docs/A-101.pdf", Data("test".utf8)), ("docs/B.pdf", Data("nope".utf8)),
        ])
        let database = try corpus.workspace.database("device.sqlite")
        let before = try Data(contentsOf: URL(fileURLWithPath: database))

        #expect(throws: BundleError.self) { try BundleImporter().importBundle(at: url, intoDatabaseAt: database) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == before)
        #expect(Self.storedNames(database).isEmpty, "\(Self.storedNames(database))")
    }

    @Test func aDeviceExportsItsFilesAsAZipThatRoundTrips() throws {
        let corpus = try HostileBundleTests.Corpus()
        let source = try corpus.workspace.database("source.sqlite")
        let incoming = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        try BundleImporter().importBundle(at: incoming, intoDatabaseAt: source)

        for format in BundleFormat.allCases {
            let first = corpus.workspace.url("export-\(format).zip")
            let summary = try BundleExporter().exportArchive(SampleProject.project, fromDatabaseAt: source, format: format, to: first)
            #expect(summary.records == SampleProject.records.count)
            // Both drawings name the same bytes: shipped once, under the first one's name. The sample's photo
            // and voice note name sizes no file here has, so they are reported, not shipped.
            #expect(summary.files == 1)
            #expect(summary.missingFiles == ["IMG_0042.jpg", "note-1.m4a"])
            let names = try Archive(url: first, accessMode: .read).map(\.path).sorted()
            #expect(names == ["bundle.\(format)", "files/A-101.pdf"])
            #expect(BundleValidator().errors(inBundleAt: first).isEmpty)

            let target = try corpus.workspace.database("target-\(format).sqlite")
            let imported = try BundleImporter().importBundle(at: first, intoDatabaseAt: target)
            #expect(imported.filesStored == 1)
            #expect(try corpus.workspace.contents(of: target) == corpus.workspace.contents(of: source))

            let second = corpus.workspace.url("again-\(format).zip")
            try BundleExporter().exportArchive(SampleProject.project, fromDatabaseAt: target, format: format, to: second)
            #expect(try Data(contentsOf: second) == Data(contentsOf: first), "export → import → export changed the \(format) archive")
        }
    }

    @Test func aFileWhoseBytesChangedOnTheDeviceIsNotShipped() throws {
        let corpus = try HostileBundleTests.Corpus()
        let source = try corpus.workspace.database("source.sqlite")
        let incoming = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        try BundleImporter().importBundle(at: incoming, intoDatabaseAt: source)
        let stored = try #require(BundleImporter.storedFile(sha256: SampleProject.drawingDigest, forDatabaseAt: source))
        try Data("TEST".utf8).write(to: stored)

        let url = corpus.workspace.url("export.zip")
        let summary = try BundleExporter().exportArchive(SampleProject.project, fromDatabaseAt: source, format: .json, to: url)
        #expect(summary.files == 0)
        #expect(summary.missingFiles.contains("A-101.pdf"))
        #expect(try BundleImporter().importBundle(at: url, intoDatabaseAt: corpus.workspace.database("t.sqlite")).filesVerified == 0)
    }
}
