@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import GRDB
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import OutpostWire
import Testing

/// The fast path of an import (staged rows written in key order, values bound straight from records, a
/// validating spelling of the XSD) gives exactly what the store itself would write and refuses what it must.
@Suite(.fieldService) struct ImportStagingTests {
    @Test(arguments: BundleFormat.allCases)
    func stagedRowsEqualTheRowsTheStoreWrites(format: BundleFormat) throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.\(format.rawValue)")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: url)
        let target = try workspace.database("target.sqlite")
        let summary = try LocalStore.open(at: target).importBundle(at: url)
        #expect(summary.total.inserted == SampleProject.records.count)
        for description in EntityCatalog.all {
            let sql = "SELECT * FROM \(description.table.quotedDatabaseIdentifier) ORDER BY id"
            let saved = try DatabaseQueue(path: workspace.databasePath).read { try Row.fetchAll($0, sql: sql) }
            let imported = try DatabaseQueue(path: target).read { try Row.fetchAll($0, sql: sql) }
            #expect(imported == saved, "\(description.table)")
        }
    }

    @Test func everyStagedColumnIsAColumnOfItsTable() throws {
        let workspace = try Workspace()
        try DatabaseQueue(path: workspace.databasePath).read { db in
            for description in EntityCatalog.all {
                let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(\(description.table.quotedDatabaseIdentifier))")
                    .map { $0["name"] as String }
                let staged = TableLayout.of(description.type).columns
                // Columns outside the catalog (issues.description, kept by v4's rename; media's local_path,
                // a device's own) are the store's to fill; `stagedRowsEqualTheRowsTheStoreWrites` checks them.
                #expect(Set(staged).isSubset(of: columns), "\(description.table)")
                #expect(staged.count == Set(staged).count, "\(description.table)")
            }
        }
    }

    @Test(arguments: BundleFormat.allCases)
    func aDuplicateAmongNewRecordsIsLocatedAndNothingIsWritten(format: BundleFormat) throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.\(format.rawValue)")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: format, to: url)
        let text = try String(contentsOf: url, encoding: .utf8).replacingOccurrences(of: "000000000051", with: "000000000050")
        let duplicated = try workspace.file("duplicated.\(format.rawValue)", text)
        let lines = text.components(separatedBy: "\n")
        let idMark = format == .xml ? " id=\"0b5e55ed-0000-4000-8000-000000000050\"" : "\"id\": \"0b5e55ed-0000-4000-8000-000000000050\""
        let secondLine = try #require(lines.indices.filter { lines[$0].contains(idMark) }.dropFirst().first) + 1

        let target = try workspace.database("empty.sqlite")
        let store = try LocalStore.open(at: target)
        let before = try workspace.snapshot(of: target)
        #expect(performing: { try store.importBundle(at: duplicated) }, throws: { error in
            guard let error = error as? BundleError else { return false }
            return error.code == .duplicateRecord && error.id == SampleProject.id(50) && error.entity == .issue
                && error.line == secondLine && (format == .xml || error.jsonPath?.hasPrefix("$.records[") == true)
        })
        #expect(try workspace.snapshot(of: target) == before)
    }

    /// A table that started empty takes records straight in while their ids ascend and stages the rest
    /// once one comes out of order (`StagedTable`): whatever the order, the same rows, the same versions
    /// noted as the bundle's word, the same orphans flagged, and a duplicate of a record written straight
    /// in refused at the second one's place.
    @Test(arguments: 1...8 as ClosedRange<UInt64>)
    func anyOrderOfRecordsImportsTheSameRows(seed: UInt64) throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.xml")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .xml, to: url)
        var (head, records, tail) = try Self.recordChunks(of: String(contentsOf: url, encoding: .utf8))
        // Without the measure sheet, its measures are orphans, whichever way they are written.
        records.removeAll { $0.first?.contains("\"\(SampleProject.id(21).storageText)\"") == true }
        func document(_ chunks: [[Substring]]) -> String {
            head + chunks.flatMap { $0 }.joined(separator: "\n") + "\n" + tail
        }
        func imported(_ name: String, _ chunks: [[Substring]]) throws -> [String: [Row]] {
            let target = try workspace.database("\(name).sqlite")
            _ = try LocalStore.open(at: target).importBundle(at: try workspace.file("\(name).xml", document(chunks)))
            return try workspace.snapshot(of: target).filter { name, _ in
                name == "imported_versions" || EntityCatalog.all.contains { $0.table == name }
            }
        }
        var random = SeededGenerator(seed: seed)
        // A prefix in the export's order (written straight in), then the rest shuffled (staged from the
        // first id out of order).
        let cut = Int.random(in: 0...records.count, using: &random)
        let reordered = Array(records[..<cut]) + records[cut...].shuffled(using: &random)
        let expected = try imported("in-order", records)
        #expect(try imported("reordered", reordered) == expected, "seed \(seed), cut \(cut)")
        #expect(expected["measures"]?.allSatisfy { $0["is_orphaned"] as Int64 == 1 } == true)
        #expect(expected["imported_versions"]?.count == records.count)

        // The first record of an entity again after the rest of the bundle: written straight in once,
        // so the second is the duplicate, and nothing is written.
        let entityOf = { (chunk: [Substring]) in chunk.first?.split(separator: " ").first }
        let firsts = records.indices.filter { $0 == 0 || entityOf(records[$0]) != entityOf(records[$0 - 1]) }
        let first = firsts[Int.random(in: 0..<firsts.count, using: &random)]
        let duplicated = try workspace.file("duplicated.xml", document(records + [records[first]]))
        let secondLine = head.components(separatedBy: "\n").count + records.map(\.count).reduce(0, +)
        let target = try workspace.database("duplicated.sqlite")
        let store = try LocalStore.open(at: target)
        let before = try workspace.snapshot(of: target)
        #expect(performing: { try store.importBundle(at: duplicated) }, throws: { error in
            guard let error = error as? BundleError else { return false }
            return error.code == .duplicateRecord && error.line == secondLine
        })
        #expect(try workspace.snapshot(of: target) == before)
    }

    /// An XML export's text before its records, each record's lines (a record starts on a line indented
    /// by four spaces), and the text from `</records>` on.
    static func recordChunks(of text: String) throws -> (head: String, records: [[Substring]], tail: String) {
        let head = try #require(text.range(of: "  <records>\n"))
        let tail = try #require(text.range(of: "  </records>"))
        var records: [[Substring]] = []
        for line in text[head.upperBound..<tail.lowerBound].split(separator: "\n") {
            if line.hasPrefix("    <") && !line.hasPrefix("    </") { records.append([]) }
            records[records.count - 1].append(line)
        }
        return (String(text[..<head.upperBound]), records, String(text[tail.lowerBound...]))
    }

    @Test func theFastUUIDParserAgreesWithFoundation() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let id = UUID()
            #expect(UUID(hyphenatedText: id.uuidString) == id)
            #expect(UUID(hyphenatedText: id.uuidString.lowercased()) == id)
            #expect(id.storageText == id.uuidString.lowercased())
            var broken = Array(id.uuidString.utf8)
            broken[Int.random(in: 0..<broken.count, using: &random)] = UInt8(ascii: "g")
            let text = String(decoding: broken, as: UTF8.self)
            #expect(UUID(hyphenatedText: text) == UUID(uuidString: text), "\(text)")
        }
        for text in ["", "0b5e55ed-0000-4000-8000-00000000002", "0b5e55ed00000-4000-8000-000000000002", "{0b5e55ed-0000-4000-8000-000000000002}"] {
            #expect(UUID(hyphenatedText: text) == nil, "\(text)")
        }
    }

    /// The differences are exactly one content model respelled and the two patterns the reader checks
    /// (`ValuePatternTests` holds the reader to those patterns).
    @Test func theValidatingSchemaIsTheFrozenOneWithOneContentModelRespelledAndTwoPatternsLeftToTheReader() {
        let undone = LibXML.validatingXSD
            .replacingOccurrences(of: "<xs:sequence minOccurs=\"0\" maxOccurs=\"unbounded\"><xs:choice>",
                with: "<xs:choice minOccurs=\"0\" maxOccurs=\"unbounded\">")
            .replacingOccurrences(of: "</xs:choice></xs:sequence>", with: "</xs:choice>")
        let uuid = #"<xs:pattern value="[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"/>"#
        let timestamp = #"<xs:pattern value="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z"/>"#
        #expect(BundleSchema.xsd.components(separatedBy: uuid).count == 2)
        #expect(BundleSchema.xsd.components(separatedBy: timestamp).count == 2)
        #expect(undone == BundleSchema.xsd.replacingOccurrences(of: uuid, with: "").replacingOccurrences(of: timestamp, with: ""))
        #expect(LibXML.patternsLeftToTheReader == ["uuid", "timestamp"])
    }

    @Test func recordsInAnyOrderOrNoneAreValidAndAStrangerInRecordsIsNot() throws {
        let workspace = try Workspace()
        try workspace.save(SampleProject.records)
        let url = workspace.url("bundle.xml")
        try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .xml, to: url)
        let text = try String(contentsOf: url, encoding: .utf8)
        let (head, records, tail) = try Self.recordChunks(of: text)
        #expect(records.count == SampleProject.records.count)
        let reversed = head + records.reversed().flatMap { $0 }.joined(separator: "\n") + "\n" + tail
        #expect(BundleValidator().errors(inBundleAt: try workspace.file("reversed.xml", String(reversed))).isEmpty)
        let empty = head.dropLast("  <records>\n".count) + "  <records/>\n" + tail.dropFirst("  </records>".count).drop { $0 == "\n" }
        #expect(BundleValidator().errors(inBundleAt: try workspace.file("empty.xml", String(empty))).isEmpty)
        let stranger = text.replacingOccurrences(of: "  </records>", with: "    <invoice id=\"x\"/>\n  </records>")
        let errors = BundleValidator().errors(inBundleAt: try workspace.file("stranger.xml", stranger))
        #expect(errors.first?.code == .schemaViolation, "\(errors)")
    }
}

/// Staged records of megabytes are moved into their table through an index of their ids, not sorted
/// whole: SQLite's sort kept a row of each run it spilled, 1.6 MB of memory per record of three 1 MB
/// values, 480 MiB for an import of 300 (attack 68, finding 7; `sqlite3` alone: 196 MB for 100 such rows
/// sorted whole, 24 MB through an index). A megabyte server id is as large (attack 127, finding 5).
@Suite(.fieldService) struct LargeStagedRowsTests {
    @Test(arguments: [(1_000_000, true, false), (1_000, false, false), (1_000_000, true, true), (1_000, false, true)])
    func largeStagedRowsAreMovedThroughAnIndexOfTheirIds(details: Int, throughIndex: Bool, inServerID: Bool) throws {
        let workspace = try Workspace()
        _ = try LocalStore.open(at: workspace.databasePath)
        let project = UUID()
        // Ids in descending order: the first goes straight in, the others are staged.
        let ids = (0..<3).map { _ in UUID() }.sorted { $0.uuidString > $1.uuidString }
        try DatabaseQueue(path: workspace.databasePath).inTransaction { db in
            let table = try StagedTable(EntityType.issue.description, in: db)
            for id in ids {
                var issue = OutpostModels.Issue(id: id, projectID: project, title: "Large")
                var record = issue.record
                if inServerID {
                    record.sync.serverID = id.uuidString + String(repeating: "w", count: details)
                } else {
                    issue.details = String(repeating: "w", count: details)
                    record = issue.record
                }
                try table.stage(record, at: SourceLocation())
            }
            try table.flush(location: SourceLocation())
            #expect(table.flushedThroughIndex == throughIndex)
            let stored = try Int.fetchOne(
                db, sql: inServerID ? "SELECT count(*) FROM issues WHERE length(server_id) = ?" : "SELECT count(*) FROM issues WHERE length(details) = ?",
                arguments: [inServerID ? 36 + details : details])
            #expect(stored == 3)
            try table.drop()
            return .rollback
        }
    }
}
