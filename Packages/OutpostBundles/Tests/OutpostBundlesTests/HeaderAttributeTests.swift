@testable import OutpostBundles
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostSchema
import OutpostTesting
import OutpostWire
import Testing

/// The XML header's attributes carry what keeps a bundle to its project: the format version, the project
/// id and the checkpoints a device has the server confirm. A `formatVersion` of `" 2"` (an
/// `xs:positiveInteger`, whose whitespace the schema collapses) validated, and the reader then dropped the
/// whole header without a word: no project check, no checkpoints (attack 124, F1). The law, over seeded
/// spellings of each attribute: what the published schema refuses is refused; what it accepts is read as
/// the header it stands for, or refused with a clear error when this build does not read that version;
/// a header is never left unread.
@Suite(.fieldService) struct HeaderAttributeTests {
    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    private static let checkpoint = "17.0123456789abcdef"

    /// The example's root element with `formatVersion` and `checkpoints` as given.
    private static func document(version: String, checkpoints: String?) -> String {
        let root = #"<bundle formatVersion="2" projectID="0b5e55ed-0000-4000-8000-000000000002""#
        let spelled = #"<bundle formatVersion="\#(version)" projectID="0b5e55ed-0000-4000-8000-000000000002""#
            + (checkpoints.map { #" checkpoints="\#($0)""# } ?? "")
        return example.replacingOccurrences(of: root, with: spelled)
    }

    /// What a stream made of `url` gives: its project and checkpoints once read whole, or its error.
    private static func read(_ url: URL) -> Result<(project: UUID?, checkpoints: [String], records: Int), BundleError> {
        do throws(BundleError) {
            let stream = try BundleImporter().open(url)
            var records = 0
            while let batch = try stream.nextBatch() { records += batch.count }
            return .success((stream.projectID, stream.checkpoints, records))
        } catch {
            return .failure(error)
        }
    }

    @Test("A format version is read as the published schema takes it, or refused; the header is never dropped", arguments: [1, 2])
    func formatVersionsAreReadOrRefused(seed: UInt64) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-header-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let project = UUID(uuidString: "0b5e55ed-0000-4000-8000-000000000002")!
        var random = SeededGenerator(seed: seed)
        let spaces = [" ", "\t", "\n", "&#9;", "&#10;", "&#13;", "&#32;", "\u{A0}"]
        let numbers = ["1", "2", "3", "0", "-2", "+2", "02", "0002", "2.0", "1e0", "two", "", "99999999999999999999", "18446744073709551618"]
        var read = 0, refused = 0, unsupported = 0
        for round in 0..<120 {
            var version = numbers.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                let space = spaces.randomElement(using: &random)!
                version = Bool.random(using: &random) ? space + version : version + space
            }
            let checkpoints: String? = Bool.random(using: &random) ? Self.checkpoint : nil
            let document = Self.document(version: version, checkpoints: checkpoints)
            let url = folder.appendingPathComponent("header-\(round).xml")
            try Data(document.utf8).write(to: url)
            let published = try LibXMLCheck.errors(validating: document, against: BundleSchema.xsd).isEmpty
            let validated = BundleValidator().errors(inBundleAt: url)
            let outcome = Self.read(url)
            let context = "formatVersion '\(version)', checkpoints \(checkpoints ?? "none")"
            // The number the published schema stands for, when it accepts the text.
            let digits = version.replacingOccurrences(of: "&#9;", with: "").replacingOccurrences(of: "&#10;", with: "")
                .replacingOccurrences(of: "&#13;", with: "").replacingOccurrences(of: "&#32;", with: "")
                .trimmingCharacters(in: CharacterSet(charactersIn: " \t\n")).drop { $0 == "+" }
            let stands = Int(digits)
            switch outcome {
            case .success(let header):
                #expect(published, "\(context): imported, though the published schema refuses it")
                #expect(validated.isEmpty, "\(context): \(validated)")
                #expect(header.project == project, "\(context): the header's project was not read")
                #expect(header.checkpoints == (checkpoints.map { [$0] } ?? []), "\(context): \(header.checkpoints)")
                #expect(stands.map(BundleFormat.readableVersions.contains) == true && !(stands == 1 && checkpoints != nil), "\(context)")
                read += 1
            case .failure(let error):
                #expect(!validated.isEmpty, "\(context): the stream refused it (\(error)) and the validator did not")
                if published {
                    // Accepted by the schema, refused by this build: only for a version it does not read
                    // (or checkpoints in a version 1 bundle), and then saying so.
                    let readable = stands.map(BundleFormat.readableVersions.contains) ?? false
                    #expect(!readable || (stands == 1 && checkpoints != nil), "\(context): refused with \(error)")
                    if !readable {
                        #expect(error.code == .unsupportedFormatVersion, "\(context): \(error)")
                        unsupported += 1
                    }
                } else {
                    refused += 1
                }
            }
        }
        #expect(read > 15 && refused > 15 && unsupported > 10, "\(read) read, \(refused) refused, \(unsupported) of versions not read")
    }
}
