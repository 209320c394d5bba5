@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostWire
import Testing
import ZIPFoundation

/// Zip bundles end to end: the files they ship are stored for the device (only once the records
/// commit), and a device exports what it holds as a zip that imports elsewhere and exports again to the
/// same bytes.
@Suite(.fieldService) struct ArchiveTests {
    /// Files in `<database>.files/`, hidden working folders included.
    static func storedNames(_ databasePath: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: databasePath + ".files")) ?? []).sorted()
    }

    @Test func aZipImportStoresItsFilesOnceByDigest() throws {
        let corpus = try HostileBundleTests.Corpus()
        let url = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        let database = try corpus.workspace.database("device.sqlite")

        let first = try LocalStore.open(at: database).importBundle(at: url)
        #expect(first.filesVerified == 1)
        #expect(first.filesStored == 1)
        let stored = try #require(BundleImporter.storedFile(sha256: SampleProject.drawingDigest, forDatabaseAt: database))
        #expect(try Data(contentsOf: stored) == Data("test".utf8))
        #expect(Self.storedNames(database) == [SampleProject.drawingDigest])

        let second = try LocalStore.open(at: database).importBundle(at: url)
        #expect(second.filesVerified == 1)
        #expect(second.filesStored == 0)
        #expect(BundleImporter.storedFile(sha256: "not-a-digest/../../etc", forDatabaseAt: database) == nil)
    }

    /// A stored file stays while any record names it, a delete the server has not taken yet included
    /// (a conflict may bring the record back), and goes once none does: its record's delete was taken,
    /// or the record went whole. An import's working folder is never the sweep's.
    @Test func aStoredFileGoesOnceNoRecordNamesIt() throws {
        let corpus = try HostileBundleTests.Corpus()
        let url = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        let database = try corpus.workspace.database("device.sqlite")
        let store = try LocalStore.open(at: database)
        let working = URL(fileURLWithPath: database + ".files/.incoming-\(UUID().uuidString.lowercased())")

        try store.importBundle(at: url)
        try FileManager.default.createDirectory(at: working, withIntermediateDirectories: true)
        // A folder under a digest's name is nothing an import stored: the sweep leaves it and what it holds.
        let folder = URL(fileURLWithPath: database + ".files/" + String(repeating: "cd", count: 32))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("inside"), withIntermediateDirectories: true)
        #expect(try store.sweepOriginals() == 0)
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("inside").path))
        try FileManager.default.removeItem(at: folder)
        #expect(Self.storedNames(database) == [working.lastPathComponent, SampleProject.drawingDigest].sorted())

        // The sample's drawings, RFI and media all name the one file.
        let tables = ["reference_documents", "media_attachments"]
        func everyRecord(_ sql: String) throws {
            try store.write { db in for table in tables { try db.execute(sql: sql.replacingOccurrences(of: "$table", with: table)) } }
        }
        try everyRecord("UPDATE $table SET deleted_at = 1, sync_status = 'pending'")
        #expect(try store.sweepOriginals() == 0, "a delete not yet taken keeps its file")
        try everyRecord("UPDATE $table SET sync_status = 'synced'")
        #expect(try store.sweepOriginals() == 1)
        #expect(Self.storedNames(database) == [working.lastPathComponent])

        try everyRecord("DELETE FROM $table")
        try store.importBundle(at: url)
        #expect(Self.storedNames(database).contains(SampleProject.drawingDigest), "stored again")
        try everyRecord("DELETE FROM $table")
        #expect(try store.sweepOriginals() == 1)
        #expect(Self.storedNames(database) == [working.lastPathComponent])
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
        let store = try LocalStore.open(at: database)
        let before = try corpus.workspace.snapshot(of: database)

        #expect(throws: BundleError.self) { try store.importBundle(at: url) }
        #expect(try corpus.workspace.snapshot(of: database) == before)
        #expect(Self.storedNames(database).isEmpty, "\(Self.storedNames(database))")
    }

    /// What an export to a pipe or a device writes into it, the path left what it was: the writer created
    /// an empty file beside the path and renamed it over it, so `--out /dev/null` replaced the machine's
    /// /dev/null with a regular file (attack 69). A pipe stands in for the device here (making one needs no
    /// privileges); it holds 64 KiB, more than the sample project's bundle or zip.
    @Test(arguments: ["json", "xml", "zip"])
    func anExportToAPipeWritesIntoIt(_ kind: String) throws {
        let corpus = try HostileBundleTests.Corpus()
        let source = try corpus.workspace.database("source.sqlite")
        let incoming = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        let store = try LocalStore.open(at: source)
        try store.importBundle(at: incoming)
        func export(to url: URL) throws {
            if kind == "zip" {
                try store.exportArchive(project: SampleProject.project, format: .json, to: url)
            } else {
                try store.exportBundle(project: SampleProject.project, format: kind == "xml" ? .xml : .json, to: url)
            }
        }
        let regular = corpus.workspace.url("export.\(kind)")
        try export(to: regular)
        let pipe = corpus.workspace.url("pipe")
        #expect(mkfifo(pipe.path, 0o600) == 0)
        // Opened for reading first, without waiting: the export's open for writing then finds a reader.
        let reader = open(pipe.path, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        try export(to: pipe)
        var info = stat()
        #expect(stat(pipe.path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFIFO, "the pipe was replaced by another kind of file")
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(reader, &chunk, chunk.count)
            guard count > 0 else { break }
            received.append(contentsOf: chunk[0..<count])
        }
        #expect(received == (try Data(contentsOf: regular)))
    }

    @Test func aDeviceExportsItsFilesAsAZipThatRoundTrips() throws {
        let corpus = try HostileBundleTests.Corpus()
        let source = try corpus.workspace.database("source.sqlite")
        let incoming = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        try LocalStore.open(at: source).importBundle(at: incoming)

        for format in BundleFormat.allCases {
            let first = corpus.workspace.url("export-\(format).zip")
            let summary = try LocalStore.open(at: source).exportArchive(project: SampleProject.project, format: format, to: first)
            #expect(summary.records == SampleProject.records.count)
            // Both drawings name the same bytes: shipped once, under the first one's name. The sample's photo
            // and voice note name sizes no file here has, so they are reported, not shipped.
            #expect(summary.files == 1)
            #expect(summary.missingFiles == ["IMG_0042.jpg", "note-1.m4a"])
            let names = try Archive(url: first, accessMode: .read).map(\.path).sorted()
            #expect(names == ["bundle.\(format)", "files/A-101.pdf"])
            #expect(BundleValidator().errors(inBundleAt: first).isEmpty)

            let target = try corpus.workspace.database("target-\(format).sqlite")
            let imported = try LocalStore.open(at: target).importBundle(at: first)
            #expect(imported.filesStored == 1)
            #expect(try corpus.workspace.contents(of: target) == corpus.workspace.contents(of: source))

            let second = corpus.workspace.url("again-\(format).zip")
            try LocalStore.open(at: target).exportArchive(project: SampleProject.project, format: format, to: second)
            #expect(try Data(contentsOf: second) == Data(contentsOf: first), "export → import → export changed the \(format) archive")
        }
    }

    @Test func aFileWhoseBytesChangedOnTheDeviceIsNotShipped() throws {
        let corpus = try HostileBundleTests.Corpus()
        let source = try corpus.workspace.database("source.sqlite")
        let incoming = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        try LocalStore.open(at: source).importBundle(at: incoming)
        let stored = try #require(BundleImporter.storedFile(sha256: SampleProject.drawingDigest, forDatabaseAt: source))
        try Data("TEST".utf8).write(to: stored)

        let url = corpus.workspace.url("export.zip")
        let summary = try LocalStore.open(at: source).exportArchive(project: SampleProject.project, format: .json, to: url)
        #expect(summary.files == 0)
        #expect(summary.missingFiles.contains("A-101.pdf"))
        #expect(try LocalStore.open(at: corpus.workspace.database("t.sqlite")).importBundle(at: url).filesVerified == 0)
    }
}
