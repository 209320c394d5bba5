@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import OutpostWire
import Testing

/// An archive the exporter writes is one an importer takes, whatever its records and files hold.
/// Deflated, a record's 1 MiB text of one letter made the manifest expand 631 times and a silent voice
/// note 1,020 times, past the zip bomb guard (`BundleLimits.maximumCompressionRatio`, 200): a
/// project's export holding either could not be read back (attack 118, F2). Such entries go stored.
@Suite(.fieldService) struct ArchiveExportTests {
    @Test(arguments: BundleFormat.allCases)
    func entriesThatShrinkPastTheImportersGuardGoStored(format: BundleFormat) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-archive-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // The repository's example project, one of its records given a 1 MiB text of one letter.
        let stream = try BundleImporter().open(RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.json"))
        var records: [EntityRecord] = []
        while let batch = try stream.nextBatch() { records += batch.map(\.record) }
        let project = try #require(records.first { $0.entity == EntityCatalog.schema.scope }).id
        let long = try #require(records.firstIndex { $0.entity == .issue })
        records[long]["details"] = .text(String(repeating: "a", count: EntityRecord.maximumTextBytes))
        // A 2 MiB voice note of silence, and a file that deflates as files usually do.
        let silence = folder.appendingPathComponent("silence.wav")
        try Data(count: 2 << 20).write(to: silence)
        let noise = folder.appendingPathComponent("noise.bin")
        try Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }).write(to: noise)
        let files = [
            ShippedFile(name: "note.wav", byteSize: 2 << 20, sha256: String(repeating: "0", count: 64), source: silence),
            ShippedFile(name: "noise.bin", byteSize: 1 << 20, sha256: String(repeating: "1", count: 64), source: noise),
        ]
        let archive = folder.appendingPathComponent("project.zip")
        try BundleExporter().exportArchive(project: project, records: records, files: files, format: format, to: archive)

        _ = try ZipContainer(path: archive.path, limits: .standard)
        let read = try BundleImporter().open(archive)
        var count = 0
        while let batch = try read.nextBatch() { count += batch.count }
        #expect(count == records.count)
    }

    /// Each shipped file gets an entry name of its own. A file named as another file's digest took the
    /// very name that file, unable to keep its own (used twice, or not plain), went under: two entries
    /// of one name, and an archive the importer refused (review of attack 118 F2's fix). Seeded sets of
    /// such names, digests, repeats and plain names.
    @Test(arguments: 0..<6)
    func noTwoShippedFilesShareAnEntryName(seed: Int) {
        var random = SeededGenerator(seed: UInt64(9_100 + seed))
        let digests = (0..<8).map { _ in String((0..<64).map { _ in "0123456789abcdef".randomElement(using: &random)! }) }
        let names = ["photo.jpg", "a/b.jpg", "note.wav"] + digests.prefix(4)
        let files = digests.map { digest in
            ShippedFile(name: names.randomElement(using: &random)!, byteSize: 1, sha256: digest, source: URL(fileURLWithPath: "/dev/null"))
        }
        let entries = ShippedFile.entries(for: files).map(\.reference.name)
        #expect(Set(entries).count == entries.count, "\(entries)")
    }
}
