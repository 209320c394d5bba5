@testable import OutpostBundles
import Clibxml2
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostTesting
import Testing

/// libxml2 2.9 checks each attribute of a start tag against every one before it, and each namespace
/// declaration likewise: an element of 80,000 attributes took an import 1.3 s inside the parser, before
/// any callback of ours, and the cost grows with the square (attack 129, F3 and F4). The reader counts
/// each start tag's attributes as the bytes go by (`XMLAttributeCount`) and refuses a tag past the limit
/// before the parser sees it.
@Suite(.fieldService) struct XMLAttributeCountTests {
    private static let example: String = {
        let url = RepositorySchemas.folder.appendingPathComponent("examples/project-bundle.xml")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    /// The attributes and namespace declarations of each element of `document`, in document order, as
    /// libxml2's own tree of it has them; nil when libxml2 finds it not well-formed.
    private static func attributeCounts(inDocument document: String) -> [(count: Int, line: Int)]? {
        let bytes = Array(document.utf8)
        guard let tree = bytes.withUnsafeBufferPointer({ buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                xmlReadMemory($0, Int32(buffer.count), "generated.xml", nil,
                    Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue))
            }
        }) else { return nil }
        defer { xmlFreeDoc(tree) }
        var counts: [(count: Int, line: Int)] = []
        func walk(_ node: xmlNodePtr?) {
            var child = node
            while let current = child {
                if current.pointee.type == XML_ELEMENT_NODE {
                    var count = 0
                    var property = current.pointee.properties
                    while let each = property { count += 1; property = each.pointee.next }
                    var namespace = current.pointee.nsDef
                    while let each = namespace { count += 1; namespace = each.pointee.next }
                    counts.append((count, Int(xmlGetLineNo(current))))
                    walk(current.pointee.children)
                }
                child = current.pointee.next
            }
        }
        walk(xmlDocGetRootElement(tree))
        return counts
    }

    /// More `=` than any limit tried: read as attributes, a decoy holding them would be refused.
    private static let equalSigns = String(repeating: "k=1 ", count: 70)

    /// Markup that holds what looks like attributes and tags and is none: each is read past whole.
    private static let decoys = [
        "<!-- <a b=\"c\" d=\"e\"> = - > <a \(equalSigns)> -->", "<![CDATA[<a b=\"c\"> ]] > ]> <a \(equalSigns)> ]]]>",
        "<?note x=\"1\" y='2' > <a \(equalSigns)> ?>", "text with &amp; = and &gt; signs, \(equalSigns)", "\n", "<e/>", "<e></e>",
    ]

    /// A generated well-formed document of nested elements, some with many attributes (values holding
    /// `>`, `=` and the other quote), some with namespace declarations, decoys between them.
    /// With the document, the line of each element's `<`, in document order.
    private static func document(_ random: inout SeededGenerator) -> (text: String, lines: [Int]) {
        var text = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- start = -->\n"
        var lines: [Int] = []
        func element(depth: Int) {
            let attributes = Int.random(in: 0...(Bool.random(using: &random) ? 8 : 90), using: &random)
            lines.append(text.utf8.count { $0 == 0x0A } + 1)
            text += "<e"
            for index in 0..<attributes {
                let spacing = [" ", "\n  ", "\t"].randomElement(using: &random)!
                let eq = [" = ", "=", "\n=\n"].randomElement(using: &random)!
                let value = ["v", "a>b", "x=y", "it's", "say \"hi\"", "", "> \(equalSigns)"].randomElement(using: &random)!
                let quote = value.contains("\"") ? "'" : value.contains("'") ? "\"" : ["\"", "'"].randomElement(using: &random)!
                let name = index % 7 == 3 ? "xmlns:p\(index)" : "a\(index)"
                let written = name.hasPrefix("xmlns") ? "urn:\(index)" : value
                text += "\(spacing)\(name)\(eq)\(quote)\(written)\(quote)"
            }
            guard depth < 3, Bool.random(using: &random) else {
                text += Bool.random(using: &random) ? "/>" : "></e >"
                return
            }
            text += ">"
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let decoy = decoys.randomElement(using: &random)!
                if decoy.hasPrefix("<e") { lines.append(text.utf8.count { $0 == 0x0A } + 1) }  // an element
                text += decoy
                element(depth: depth + 1)
            }
            text += "</e>"
        }
        element(depth: 0)
        return (text + "\n<!-- end -->\n", lines)
    }

    /// The law, over 300 generated documents each cut into chunks at random places: the count refuses a
    /// document exactly when one of its elements has more attributes than the limit, by libxml2's count,
    /// and names the line of the first such element's `<`.
    @Test func theCountRefusesExactlyTheDocumentsLibxml2CountsPastTheLimit() throws {
        var random = SeededGenerator(seed: 0xA771_2B0C)
        var refused = 0
        for round in 0..<300 {
            let (document, lines) = Self.document(&random)
            let counts = try #require(Self.attributeCounts(inDocument: document), "round \(round): not well-formed:\n\(document)")
            try #require(counts.count == lines.count, "round \(round): libxml2 sees \(counts.count) elements, \(lines.count) were written")
            let limit = [8, 40, 64].randomElement(using: &random)!
            var count = XMLAttributeCount(limit: limit)
            let bytes = Array(document.utf8)
            var start = 0, within = true
            while within, start < bytes.count {
                let end = min(bytes.count, start + Int.random(in: 1...64, using: &random))
                let verdict = bytes[start..<end].withUnsafeBytes { count.scan($0) }
                if case .pastTheLimit(let tag?) = verdict {
                    #expect(bytes[start + tag] == UInt8(ascii: "<"), "round \(round): the refused tag's offset is not its <")
                }
                within = verdict == .within
                start = end
            }
            let first = counts.firstIndex { $0.count > limit }
            #expect(within == (first == nil), "round \(round): libxml2 counts \(counts.map(\.count)), limit \(limit):\n\(document)")
            if let first, !within {
                refused += 1
                #expect(count.line == lines[first], "round \(round): the refusal names line \(count.line), the tag's < is on \(lines[first])")
            }
        }
        // Both answers were walked.
        #expect(refused > 30 && refused < 270, "\(refused) of 300 refused")
    }

    /// Line feeds counted eight bytes at a time are the line feeds there are, whatever the bytes around
    /// them (bytes one bit away from a line feed, high bytes) and wherever a chunk starts and ends.
    @Test func lineFeedsCountedByTheWordAreTheLineFeedsThereAre() {
        var random = SeededGenerator(seed: 0x0A0A)
        let near: [UInt8] = [0x0A, 0x0B, 0x08, 0x8A, 0x0E, 0x2A, 0x00, 0xFF, 0x7F, 0x80, 0x09]
        for round in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...70, using: &random)).map { _ in near.randomElement(using: &random)! }
            let start = Int.random(in: 0...bytes.count, using: &random)
            let counted = bytes.withUnsafeBufferPointer { $0.baseAddress.map { XMLAttributeCount.newlines($0 + start, bytes.count - start) } ?? 0 }
            #expect(counted == bytes[start...].filter { $0 == 0x0A }.count, "round \(round): \(bytes), from \(start)")
        }
    }

    /// A refusal names the line of the tag's `<`, and where it stands in the bytes scanned, whether the
    /// tag began in them or before.
    @Test func aRefusalNamesTheTagsLineAndPlace() {
        let document = Array("<a>\n<!-- x=1 y=2 z=3 -->\n<b p='1'\nq=\"2\"\nr='3'/></a>".utf8)
        var whole = XMLAttributeCount(limit: 2)
        #expect(document.withUnsafeBytes { whole.scan($0) } == .pastTheLimit(tagStart: 25))
        #expect(document[25] == UInt8(ascii: "<") && whole.line == 3)
        var split = XMLAttributeCount(limit: 2)
        #expect(document[..<33].withUnsafeBytes { split.scan($0) } == .within)
        #expect(document[33...].withUnsafeBytes { split.scan($0) } == .pastTheLimit(tagStart: nil))
        #expect(split.line == 3)
    }

    /// What stands before the refused tag in its chunk is still read: an error there is told first,
    /// and a validation lists it before the refusal.
    @Test func anErrorBeforeTheRefusedTagIsToldFirst() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-attributes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let member = "<member id=\"0b5e55ed-0000-4000-8000-000000000010\""
        #expect(Self.example.contains("<stage>won</stage>") && Self.example.contains(member))
        let attributes = (0..<65).map { "a\($0)=\"x\"" }.joined(separator: " ")
        let url = folder.appendingPathComponent("both.xml")
        try Data(Self.example.replacingOccurrences(of: "<stage>won</stage>", with: "<stage>sold</stage>")
            .replacingOccurrences(of: member, with: "<member \(attributes) id=\"0b5e55ed-0000-4000-8000-000000000010\"").utf8).write(to: url)
        let refusal = #expect(throws: BundleError.self) {
            let stream = try BundleImporter().open(url)
            while try stream.nextBatch() != nil {}
        }
        #expect(refusal?.code == .schemaViolation && refusal?.line == 8, "\(String(describing: refusal))")
        let listed = BundleValidator().errors(inBundleAt: url)
        #expect(listed.map(\.code) == [.schemaViolation, .limitExceeded], "\(listed)")
        #expect(listed.map(\.line) == [8, 19], "\(listed)")
    }

    /// An element of 300,000 attributes, or of as many namespace declarations, is refused as a limit
    /// with its line, before libxml2 parses it; the example with no such element still reads.
    @Test(arguments: ["a%d=\"x\"", "xmlns:p%d=\"urn:x%d\""])
    func anElementOfThreeHundredThousandAttributesIsRefused(spelling: String) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-attributes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let opening = "<bundle formatVersion=\"2\""
        #expect(Self.example.contains(opening))
        let attributes = (0..<300_000).map { String(format: spelling, $0, $0) }.joined(separator: " ")
        let url = folder.appendingPathComponent("attributes.xml")
        try Data(Self.example.replacingOccurrences(of: opening, with: "\(opening) \(attributes)").utf8).write(to: url)
        let clock = ContinuousClock()
        let started = clock.now
        let refusal = #expect(throws: BundleError.self) {
            let stream = try BundleImporter().open(url)
            while try stream.nextBatch() != nil {}
        }
        let took = clock.now - started
        #expect(refusal?.code == .limitExceeded, "\(String(describing: refusal))")
        #expect(refusal?.line == 2 && refusal?.message.contains("attributes") == true, "\(String(describing: refusal))")
        // Refused before the parser sees the tag; libxml2 took 17.6 s for it in a release build of `outpost import` (and took the declarations).
        #expect(took < .seconds(5), "\(took)")
        let example = folder.appendingPathComponent("example.xml")
        try Data(Self.example.utf8).write(to: example)
        let stream = try BundleImporter().open(example)
        var records = 0
        while let batch = try stream.nextBatch() { records += batch.count }
        #expect(records > 0)
    }
}
