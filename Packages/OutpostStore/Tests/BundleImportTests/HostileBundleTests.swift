@testable import OutpostBundles
@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing
import ZIPFoundation

/// Hostile and broken bundles: each gets its located error, and the database file is byte-for-byte
/// what it was before the import.
@Suite(.fieldService) struct HostileBundleTests {
    struct Case: CustomStringConvertible, Sendable {
        let name: String
        let code: BundleError.Code
        let make: @Sendable (Corpus) throws -> URL
        let check: @Sendable (BundleError) -> Bool
        var description: String { name }
    }

    /// Builds hostile files from the sample project's exports.
    final class Corpus: Sendable {
        let workspace: Workspace
        let xml: String
        let json: String

        init() throws {
            workspace = try Workspace()
            try workspace.save(SampleProject.records)
            let xmlURL = workspace.url("sample.xml"), jsonURL = workspace.url("sample.json")
            try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .xml, to: xmlURL)
            try LocalStore.open(at: workspace.databasePath).exportBundle(project: SampleProject.project, format: .json, to: jsonURL)
            xml = try String(contentsOf: xmlURL, encoding: .utf8)
            json = try String(contentsOf: jsonURL, encoding: .utf8)
        }

        func xml(_ name: String, replacing target: String, with replacement: String) throws -> URL {
            precondition(xml.contains(target), "the sample XML has no \(target)")
            return try workspace.file(name, xml.replacingOccurrences(of: target, with: replacement))
        }

        func json(_ name: String, replacing target: String, with replacement: String) throws -> URL {
            precondition(json.contains(target), "the sample JSON has no \(target)")
            return try workspace.file(name, json.replacingOccurrences(of: target, with: replacement))
        }

        /// A zip of `entries` (name, bytes), each deflated.
        func zip(_ name: String, _ entries: [(String, Data)], symlink: String? = nil) throws -> URL {
            let url = workspace.url(name)
            let archive = try Archive(url: url, accessMode: .create)
            for (path, data) in entries {
                try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate,
                    provider: { (position: Int64, size: Int) in data.subdata(in: Int(position)..<Int(position) + size) })
            }
            if let symlink {
                try archive.addEntry(with: symlink, type: .symlink, uncompressedSize: Int64(11),
                    provider: { (_: Int64, _: Int) in Data("/etc/passwd".utf8) })
            }
            return url
        }

        var manifestWithFile: Data {
            Data(xml.replacingOccurrences(of: "  <records>", with: """
                  <files>
                    <file name="docs/A-101.pdf" byteSize="4" sha256="\(SampleProject.drawingDigest)"/>
                  </files>
                  <records>
                """).utf8)
        }
    }

    static let issueLine = "    <issue id=\"0b5e55ed-0000-4000-8000-000000000051\""

    static let cases: [Case] = [
        Case(name: "malformed XML", code: .malformedXML,
            make: { try $0.xml("malformed.xml", replacing: "</issue>\n    <issue", with: "</isue>\n    <issue") },
            check: { $0.line != nil && $0.column != nil }),
        Case(name: "XXE", code: .forbiddenConstruct,
            make: { corpus in
                let secret = try corpus.workspace.file("secret.txt", "TOP-SECRET")
                return try corpus.xml("xxe.xml", replacing: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                    with: "<?xml version=\"1.0\"?>\n<!DOCTYPE bundle [<!ENTITY xxe SYSTEM \"file://\(secret.path)\">]>\n")
                    .replacingText("<title>Outlet missing cover</title>", with: "<title>&xxe;</title>")
            },
            check: { $0.line != nil && !$0.message.contains("TOP-SECRET") }),
        Case(name: "billion laughs", code: .forbiddenConstruct,
            make: { corpus in
                var entities = "<!ENTITY lol \"lol\">"
                for level in 1...9 {
                    entities += "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level == 1 ? "" : String(level - 1));", count: 10) + "\">"
                }
                return try corpus.xml("laughs.xml", replacing: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                    with: "<?xml version=\"1.0\"?>\n<!DOCTYPE bundle [\(entities)]>\n")
                    .replacingText("<title>Outlet missing cover</title>", with: "<title>&lol9;</title>")
            },
            check: { $0.line != nil }),
        Case(name: "a DOCTYPE hidden in UTF-16", code: .forbiddenConstruct,
            make: { corpus in
                let text = corpus.xml.replacingOccurrences(
                    of: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                    with: "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<!DOCTYPE bundle [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n")
                let url = corpus.workspace.url("utf16.xml")
                try Data([0xFF, 0xFE] + Array(text.data(using: .utf16LittleEndian)!)).write(to: url)
                return url
            },
            // At line 1, as every refusal names where (attack 128, F3).
            check: { $0.message.contains("UTF-8") && $0.line == 1 }),
        // Longer than a value may be: the error names the record and the field (attack 124, F3), as every
        // other error about a value does.
        Case(name: "an XML value past the size limit", code: .limitExceeded,
            make: { try $0.xml("long.xml", replacing: "<title>Outlet missing cover</title>",
                with: "<title>" + String(repeating: "é", count: 600_000) + "</title>") },
            check: { $0.line != nil && $0.entity == .issue && $0.id != nil && $0.field == "title" }),
        Case(name: "a declared encoding other than UTF-8", code: .forbiddenConstruct,
            make: { try $0.xml("utf7.xml", replacing: "encoding=\"UTF-8\"", with: "encoding=\"UTF-7\"") },
            check: { $0.message.contains("utf-7") }),
        Case(name: "entity reference without a DTD", code: .forbiddenConstruct,
            make: { try $0.xml("entity.xml", replacing: "<title>Outlet missing cover</title>", with: "<title>&xxe;</title>") },
            check: { $0.line != nil && $0.column != nil }),
        Case(name: "wrong type (XML)", code: .schemaViolation,
            make: { try $0.xml("type.xml", replacing: "<estimatedValueCents>4250000</", with: "<estimatedValueCents>lots</") },
            check: { $0.line == 9 && $0.message.contains("estimatedValueCents") }),
        Case(name: "missing required field (XML)", code: .schemaViolation,
            make: { try $0.xml("missing.xml", replacing: "      <customerName>Zoë Müller</customerName>\n", with: "") },
            check: { $0.line != nil && $0.entity == .opportunity }),
        Case(name: "unknown enum value (XML)", code: .schemaViolation,
            make: { try $0.xml("enum.xml", replacing: "<stage>won</stage>", with: "<stage>sold</stage>") },
            check: { $0.line == 8 }),
        Case(name: "duplicate ids (XML)", code: .duplicateRecord,
            make: { try $0.xml("dup.xml", replacing: "000000000051", with: "000000000050") },
            check: { $0.line != nil && $0.entity == .issue }),
        Case(name: "record breaks a catalog rule (XML)", code: .invalidRecord,
            make: { try $0.xml("rule.xml", replacing: "<value>1000</value>", with: "<value>12000</value>") },
            check: { $0.line != nil && $0.field == "value" && $0.entity == .discount }),
        Case(name: "unsupported format version (XML)", code: .unsupportedFormatVersion,
            make: { try $0.xml("version.xml", replacing: "formatVersion=\"2\"", with: "formatVersion=\"3\"") },
            check: { $0.line == 2 }),
        // Version 0 is a change no server took: an attack set it on a deleted record, and the device's
        // restore of it went out as a create carrying every forged value with fresh clocks, over the
        // office's newer writes. A bundle holds only versions a server gave (the schemas' 0 is a
        // format's bound, frozen; this is the catalog's rule, checked after them).
        Case(name: "a record at version 0 (XML)", code: .invalidRecord,
            make: { try $0.xml("zero.xml", replacing: "000000000051\" serverID=\"srv-11\" version=\"1\"", with: "000000000051\" serverID=\"srv-11\" version=\"0\"") },
            check: { $0.line != nil && $0.entity == .issue && $0.message.contains("version 0") }),
        Case(name: "a record at version 0 (JSON)", code: .invalidRecord,
            make: { try $0.json("zero.json", replacing: "000000000051\", \"serverID\": \"srv-11\", \"version\": 1", with: "000000000051\", \"serverID\": \"srv-11\", \"version\": 0") },
            check: { $0.line != nil && $0.entity == .issue && $0.message.contains("version 0") }),
        Case(name: "a version past 64 bits (JSON)", code: .schemaViolation,
            make: { try $0.json("huge.json", replacing: "000000000051\", \"serverID\": \"srv-11\", \"version\": 1", with: "000000000051\", \"serverID\": \"srv-11\", \"version\": 9223372036854775808") },
            check: { $0.message.contains("past the largest") }),
        // Checkpoints go to the server as the device's own: only text of the form the server writes.
        Case(name: "a checkpoint the server never wrote (XML)", code: .schemaViolation,
            make: { try $0.xml("checkpoint.xml", replacing: "formatVersion=\"2\"", with: "formatVersion=\"2\" checkpoints=\"12.0123456789ABCDEF\"") },
            check: { $0.line == 2 }),
        Case(name: "a checkpoint the server never wrote (JSON)", code: .schemaViolation,
            make: { try $0.json("checkpoint.json", replacing: "\"formatVersion\": 2,", with: "\"formatVersion\": 2, \"checkpoints\": [\"012.0123456789abcdef\"],") },
            check: { $0.jsonPath == "$.checkpoints" || $0.line != nil }),
        // The reader's bound on any array's members (64) meets it first.
        Case(name: "more checkpoints than a header carries (JSON)", code: .limitExceeded,
            make: {
                let many = (1...65).map { "\"\($0).0123456789abcdef\"" }.joined(separator: ", ")
                return try $0.json("checkpoints.json", replacing: "\"formatVersion\": 2,", with: "\"formatVersion\": 2, \"checkpoints\": [\(many)],")
            },
            check: { $0.line != nil }),
        Case(name: "malformed JSON", code: .malformedJSON,
            make: { try $0.json("malformed.json", replacing: "\"stage\": \"won\"", with: "\"stage\" \"won\"") },
            check: { $0.line == 7 && $0.column != nil && $0.jsonPath == "$.records[0]" }),
        // A quote right after `\u` would end the string for a framer that skipped escapes blindly,
        // and the error would surface megabytes later at the end of the document.
        Case(name: "a \\u escape cut short by a quote (JSON)", code: .malformedJSON,
            make: { try $0.json("escape.json", replacing: "\"stage\": \"won\"", with: "\"stage\": \"w\\u\"") },
            check: { $0.line == 7 && $0.message.contains("four hex digits") && $0.jsonPath == "$.records[0]" }),
        Case(name: "wrong type (JSON)", code: .schemaViolation,
            make: { try $0.json("type.json", replacing: "\"estimatedValueCents\": 4250000", with: "\"estimatedValueCents\": \"lots\"") },
            check: { $0.jsonPath == "$.records[0].fields.estimatedValueCents" && $0.line == 7 }),
        Case(name: "missing required field (JSON)", code: .schemaViolation,
            make: { try $0.json("missing.json", replacing: "\"customerName\": \"Zoë Müller\", ", with: "") },
            check: { $0.jsonPath == "$.records[0].fields.customerName" }),
        Case(name: "unknown enum value (JSON)", code: .schemaViolation,
            make: { try $0.json("enum.json", replacing: "\"stage\": \"won\"", with: "\"stage\": \"sold\"") },
            check: { $0.jsonPath == "$.records[0].fields.stage" && $0.message.contains("sold") }),
        Case(name: "duplicate ids (JSON)", code: .duplicateRecord,
            make: { try $0.json("dup.json", replacing: "000000000051", with: "000000000050") },
            check: { $0.jsonPath?.hasPrefix("$.records[") == true && $0.id == SampleProject.id(50) }),
        Case(name: "nesting bomb (JSON)", code: .limitExceeded,
            make: { try $0.json("deep.json", replacing: "\"stage\": \"won\"",
                with: "\"stage\": " + String(repeating: "[", count: 100_000)) },
            check: { $0.jsonPath == "$.records[0]" }),
        // White space between values is no value: unbounded, a server's endless run of it (or gzip of
        // it) had a pre-sync write gigabytes to disk, read without end (attack 92, finding 1). Bounded
        // as a value is; XML's reader stops a text node at 10 MB.
        Case(name: "a run of white space longer than any value (JSON)", code: .limitExceeded,
            make: { try $0.json("spaces.json", replacing: "\"formatVersion\": 2,", with: "\"formatVersion\": 2," + String(repeating: " ", count: 8 << 20)) },
            check: { $0.line != nil && $0.message.contains("white space") }),
        // Attack 127: a plain ASCII value or a run of white space just past the limit crashed the SAX
        // reader (libxml2's fast path read on from a buffer the stop had freed).
        Case(name: "a plain ASCII value just past the limit (XML)", code: .limitExceeded,
            make: { try $0.xml("ascii.xml", replacing: "<customerName>Zoë Müller</customerName>",
                with: "<customerName>" + String(repeating: "x", count: (1 << 20) + 1) + "</customerName>") },
            check: { $0.line != nil && $0.entity == .opportunity && $0.field == "customerName" }),
        Case(name: "a run of white space just past a value's limit (XML)", code: .limitExceeded,
            make: { try $0.xml("run.xml", replacing: "</issue>\n    <issue", with: "</issue>" + String(repeating: " ", count: (1 << 20) + 1) + "<issue") },
            check: { $0.line != nil && $0.message.contains("white space") }),
        // Attack 127 F8: the schemas' maxLength counts characters, the limit UTF-8 bytes (what every
        // write and server holds a text to): 600,000 "é" are within the one and past the other, and the
        // refusal says which it counts.
        Case(name: "a value within maxLength's characters, past the limit's bytes (XML)", code: .limitExceeded,
            make: { try $0.xml("accents.xml", replacing: "<customerName>Zoë Müller</customerName>",
                with: "<customerName>" + String(repeating: "é", count: 600_000) + "</customerName>") },
            check: { $0.line != nil && $0.field == "customerName" && $0.message.contains("bytes of UTF-8") }),
        Case(name: "a value within maxLength's characters, past the limit's bytes (JSON)", code: .limitExceeded,
            make: { try $0.json("accents.json", replacing: "\"customerName\": \"Zoë Müller\"",
                with: "\"customerName\": \"" + String(repeating: "é", count: 600_000) + "\"") },
            check: { $0.line != nil && $0.message.contains("bytes of UTF-8") }),
        // Attack 129 F2: the limit held a field's text and not a server id's: an XML record took a 2 MiB
        // serverID (4 MiB in four-byte characters) that the same bundle as JSON was refused for.
        Case(name: "a server id past the limit's bytes (XML)", code: .limitExceeded,
            make: { try $0.xml("server-id.xml", replacing: "serverID=\"srv-11\"", with: "serverID=\"" + String(repeating: "é", count: 600_000) + "\"") },
            check: { $0.line != nil && $0.field == "serverID" && $0.id != nil && $0.message.contains("bytes of UTF-8") }),
        Case(name: "a server id past the limit's bytes (JSON)", code: .limitExceeded,
            make: { try $0.json("server-id.json", replacing: "\"serverID\": \"srv-11\"", with: "\"serverID\": \"" + String(repeating: "é", count: 600_000) + "\"") },
            check: { $0.line != nil && $0.message.contains("bytes of UTF-8") }),
        // Attack 127: text between records was charged to the record before it.
        Case(name: "text between records (XML)", code: .schemaViolation,
            make: { try $0.xml("stray.xml", replacing: "</issue>\n    <issue", with: "</issue>stray text<issue") },
            check: { $0.line != nil && $0.entity == nil && $0.id == nil }),
        Case(name: "a run of white space longer than any value (XML)", code: .limitExceeded,
            make: { try $0.xml("spaces.xml", replacing: "</issue>\n    <issue", with: "</issue>" + String(repeating: " ", count: 11 << 20) + "<issue") },
            check: { $0.line != nil && $0.message.contains("white space") }),
        Case(name: "truncated zip", code: .suspiciousArchive,
            make: { corpus in
                let whole = try Data(contentsOf: try corpus.zip("whole.zip", [("bundle.xml", Data(corpus.xml.utf8))]))
                return try corpus.workspace.file("truncated.zip", "").replacingData(whole.prefix(whole.count - 30))
            },
            check: { $0.file != nil }),
        Case(name: "path traversal in zip", code: .unsafeArchiveEntry,
            make: { try $0.zip("traversal.zip", [("bundle.xml", Data($0.xml.utf8)), ("../../evil.sh", Data("rm -rf".utf8))]) },
            check: { $0.archiveEntry == "../../evil.sh" }),
        Case(name: "absolute path in zip", code: .unsafeArchiveEntry,
            make: { try $0.zip("absolute.zip", [("bundle.xml", Data($0.xml.utf8)), ("/etc/cron.d/evil", Data("x".utf8))]) },
            check: { $0.archiveEntry == "/etc/cron.d/evil" }),
        Case(name: "symlink in zip", code: .unsafeArchiveEntry,
            make: { try $0.zip("symlink.zip", [("bundle.xml", Data($0.xml.utf8))], symlink: "docs/link") },
            check: { $0.archiveEntry == "docs/link" }),
        Case(name: "zip bomb", code: .suspiciousArchive,
            make: { try $0.zip("bomb.zip", [("bundle.xml", Data($0.xml.utf8)), ("zeros.bin", Data(count: 8 << 20))]) },
            check: { $0.archiveEntry == "zeros.bin" }),
        Case(name: "checksum mismatch in zip", code: .checksumMismatch,
            make: { try $0.zip("checksum.zip", [("bundle.xml", $0.manifestWithFile), ("docs/A-101.pdf", Data("tset".utf8))]) },
            check: { $0.archiveEntry == "docs/A-101.pdf" }),
        Case(name: "missing file in zip", code: .missingFile,
            make: { try $0.zip("missing.zip", [("bundle.xml", $0.manifestWithFile)]) },
            check: { $0.archiveEntry == "docs/A-101.pdf" }),
    ]

    @Test(arguments: cases)
    func refusedWithALocatedErrorAndNoChange(_ hostile: Case) throws {
        let corpus = try Corpus()
        let url = try hostile.make(corpus)
        let store = try LocalStore.open(at: corpus.workspace.databasePath)
        let before = try corpus.workspace.snapshot(of: corpus.workspace.databasePath)
        #expect(throws: BundleError.self) {
            try store.importBundle(at: url)
        }
        do {
            try store.importBundle(at: url)
        } catch {
            #expect(error.code == hostile.code, "\(hostile.name): \(error)")
            #expect(hostile.check(error), "\(hostile.name): not located as expected: \(error)")
            #expect(error.description.contains(url.path) || error.file == url.path, "\(hostile.name): \(error)")
        }
        #expect(try corpus.workspace.snapshot(of: corpus.workspace.databasePath) == before,
            "\(hostile.name): the database changed")
        let validation = BundleValidator().errors(inBundleAt: url)
        #expect(validation.first?.code == hostile.code, "\(hostile.name): validate said \(validation)")
    }

    @Test func validationCollectsEveryBrokenRecordWithItsLine() throws {
        let corpus = try Corpus()
        let url = try corpus.xml("two.xml", replacing: "<stage>won</stage>", with: "<stage>sold</stage>")
            .replacingText("<status>active</status>", with: "<status>paused</status>")
        let errors = BundleValidator().errors(inBundleAt: url)
        #expect(errors.count == 2, "\(errors)")
        #expect(errors.map(\.line) == [8, 16])
        #expect(errors.allSatisfy { $0.code == .schemaViolation })
    }

    @Test func aValidZipImportsAndItsFilesAreVerified() throws {
        let corpus = try Corpus()
        let url = try corpus.zip("good.zip", [("bundle.xml", corpus.manifestWithFile), ("docs/A-101.pdf", Data("test".utf8))])
        #expect(BundleValidator().errors(inBundleAt: url).isEmpty)
        let empty = try corpus.workspace.database("empty.sqlite")
        let summary = try LocalStore.open(at: empty).importBundle(at: url)
        #expect(summary.filesVerified == 1)
        #expect(summary.total.inserted == SampleProject.records.count)
    }
}

extension URL {
    /// Replaces text in the file and returns the same URL.
    func replacingText(_ target: String, with replacement: String) throws -> URL {
        let text = try String(contentsOf: self, encoding: .utf8)
        precondition(text.contains(target), "\(lastPathComponent) has no \(target)")
        try Data(text.replacingOccurrences(of: target, with: replacement).utf8).write(to: self)
        return self
    }

    /// Replaces the file's bytes and returns the same URL.
    func replacingData(_ data: Data) throws -> URL {
        try data.write(to: self)
        return self
    }
}
