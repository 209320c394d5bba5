import Foundation
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostTesting
import Testing

@Suite(.fieldService) struct TimeOrderedIDTests {
    @Test func idsAreVersion7AndSortByTimeInTheirStoredTextForm() {
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        let ids = (0..<2_000).map { UUID.timeOrdered(at: start.addingTimeInterval(Double($0) / 1000)) }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.uuid.6 >> 4 == 7, "version 7")
            #expect(id.uuid.8 >> 6 == 0b10, "RFC 9562 variant")
        }
        // The store keeps ids as lowercase text: one millisecond apart, the text sorts in time order.
        let texts = ids.map { $0.uuidString.lowercased() }
        let unordered = zip(texts, texts.dropFirst()).first { $0 >= $1 }
        #expect(unordered == nil, "\(String(describing: unordered))")
        // The first 48 bits are the Unix time in milliseconds.
        let first = withUnsafeBytes(of: ids[0].uuid) { $0.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        #expect(first == 1_795_000_000_000)
    }

    @Test func newRecordsGetTimeOrderedIDs() {
        let issue = Issue(projectID: UUID(), title: "Leak")
        #expect(issue.id.uuid.6 >> 4 == 7, "\(issue.id) is not a version 7 UUID")
    }

    /// The hand-formatted texts are Foundation's, byte for byte, and read back to the same id.
    @Test func hyphenatedTextsMatchFoundationAndReadBack() {
        var generator = SeededGenerator(seed: 0x0075_1D7E)
        let edges = [
            UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
            UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)),
        ]
        let ids = edges + (0..<2_000).map { _ in
            var bytes = [UInt8](repeating: 0, count: 16)
            for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
            return bytes.withUnsafeBytes { UUID(uuid: $0.load(as: uuid_t.self)) }
        }
        for id in ids {
            #expect(id.uppercasedText == id.uuidString)
            #expect(id.lowercasedText == id.uuidString.lowercased())
            #expect(UUID(hyphenatedText: id.lowercasedText) == id)
        }
    }

    /// The hand parser takes exactly the `8-4-4-4-12` hex form: each single-byte change of a valid text
    /// is refused unless it puts another hex digit where a digit was; short and long texts are refused.
    /// (Foundation's `sscanf` parse is looser, so it is not the reference here.)
    @Test func onlyTheExactHyphenatedHexFormParses() {
        let text = Array("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".utf8)
        #expect(UUID(hyphenatedText: String(decoding: text, as: UTF8.self)) != nil)
        for position in text.indices {
            for replacement in Array("-g/:@G`x 0".utf8) where replacement != text[position] {
                var changed = text
                changed[position] = replacement
                let candidate = String(decoding: changed, as: UTF8.self)
                let isHyphenPosition = [8, 13, 18, 23].contains(position)
                let stillValid = !isHyphenPosition && replacement == UInt8(ascii: "0")
                #expect((UUID(hyphenatedText: candidate) != nil) == stillValid, "\(candidate)")
                if stillValid { #expect(UUID(hyphenatedText: candidate) == UUID(uuidString: candidate)) }
            }
        }
        for candidate in [String(decoding: text.dropLast(), as: UTF8.self), String(decoding: text + [0x30], as: UTF8.self), ""] {
            #expect(UUID(hyphenatedText: candidate) == nil, "\(candidate)")
        }
    }
}
