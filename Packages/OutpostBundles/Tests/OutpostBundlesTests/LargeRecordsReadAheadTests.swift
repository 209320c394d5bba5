@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// Records are read ahead and batched by their bytes too, not only by count: 2,048 records of three
/// 1 MB values each, read ahead while the import wrote, took an import to 1.35 GB for a 900 MB bundle
/// (attack 68, finding 7). Every string a record holds counts, its server id as much as its values:
/// 400 records with a 1 MB server id each took an import to 453 MB (attack 127, finding 5).
@Suite(.fieldService) struct LargeRecordsReadAheadTests {
    /// Where a large record holds its bytes.
    enum Place: String, CaseIterable, Sendable {
        case fieldValue, serverID
    }

    /// A reader of `count` issues each holding `bytes` in `place`, counting what it has produced.
    final class LargeIssues: BundleItemReader {
        let count: Int
        let text: String
        let place: Place
        private let lock = NSLock()
        private var made = 0
        let project = UUID()

        init(count: Int, bytes: Int, in place: Place) {
            self.count = count
            self.place = place
            text = String(repeating: "x", count: bytes)
        }

        var produced: Int { lock.withLock { made } }
        var bytesRead: Int64 { 0 }
        var collectedErrors: [BundleError] { [] }

        func next() throws(BundleError) -> BundleItem? {
            let index = lock.withLock { () -> Int? in
                guard made < count else { return nil }
                made += 1
                return made
            }
            guard let index else { return nil }
            var issue = OutpostModels.Issue(projectID: project, title: "Large \(index)")
            var record: EntityRecord
            switch place {
            case .fieldValue:
                issue.details = text
                record = issue.record
            case .serverID:
                record = issue.record
                record.sync.serverID = "\(index)" + text
            }
            return .record(record, SourceLocation(file: "large.json"))
        }
    }

    @Test(arguments: Place.allCases)
    func largeRecordsAreReadAheadByBytesNotByCount(_ place: Place) throws {
        let reader = LargeIssues(count: 200, bytes: 1_000_000, in: place)
        let thread = ReaderThread(reader)
        defer { thread.finish() }
        var taken = 0, mostAhead = 0
        while try thread.next() != nil {
            taken += 1
            // Give the reader time to run as far ahead as it may.
            if taken % 25 == 1 { Thread.sleep(forTimeInterval: 0.1) }
            mostAhead = max(mostAhead, reader.produced - taken)
        }
        #expect(taken == 200)
        // Eight batches waiting, one being filled and the one being taken, of about 2 MiB each: two or
        // three of these records a batch. By count alone, all 200 (200 MB) were read at once.
        #expect(mostAhead <= 30, "\(mostAhead) records of 1 MB were read ahead")
    }

    @Test(arguments: Place.allCases)
    func aBatchOfLargeRecordsIsBoundedByBytes(_ place: Place) throws {
        let project = UUID()
        let stamp = "2026-12-01T10:00:00.000Z"
        var records = [
            #"{"entity": "project", "id": "\#(project.uuidString.lowercased())", "version": 1, "createdAt": "\#(stamp)", "updatedAt": "\#(stamp)", "fields": {"name": "Large", "address": "", "status": "active"}}"#
        ]
        let large = String(repeating: "y", count: 1_000_000)
        for index in 0..<12 {
            let (details, serverID) = place == .fieldValue ? (large, "\(index)") : ("", "\(index)" + large)
            records.append(
                #"{"entity": "issue", "id": "\#(UUID().uuidString.lowercased())", "serverID": "\#(serverID)", "version": 1, "createdAt": "\#(stamp)", "updatedAt": "\#(stamp)", "fields": {"projectID": "\#(project.uuidString.lowercased())", "title": "Large \#(index)", "details": "\#(details)", "status": "open", "priority": "medium"}}"#)
        }
        let document = #"{"format": "outpost-bundle", "formatVersion": 2, "projectID": "\#(project.uuidString.lowercased())", "asOf": "\#(stamp)", "records": ["#
            + records.joined(separator: ",\n") + "]}"
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-large-\(UUID().uuidString).json")
        try Data(document.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let stream = try BundleImporter().open(url)
        var total = 0
        while let batch = try stream.nextBatch(maximum: 256) {
            #expect(!batch.isEmpty && batch.count <= 4, "a batch of \(batch.count) records of 1 MB")
            total += batch.count
        }
        #expect(total == 13)
    }
}
