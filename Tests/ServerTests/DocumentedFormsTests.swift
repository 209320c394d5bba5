@testable import OutpostServer
import Foundation
import OutpostTesting
import Testing

/// A cursor and a Content-Range are read exactly as `schemas/sync-api.yaml`'s patterns give them: text
/// the pattern admits is read, text it refuses is a bad request (`make contract` checks the same against
/// the running server with generated text; these are the cases schemathesis found or would have to).
@Suite struct DocumentedFormsTests {
    static let one = "a0000000-0000-4000-8000-00000000000a", two = "B0000000-0000-4000-8000-00000000000B"

    @Test("A cursor: 1 to 18 digits, then project entries with or without a position; nothing else")
    func cursors() throws {
        for text in ["0", "17", "000123", "5:", "5:\(Self.one)", "5:\(Self.one)=7,\(Self.two)", "999999999999999999"] {
            #expect((try? PullCursor(text: text)) != nil, "\(text)")
        }
        for text in [
            "", "+5", "-1", "1234567890123456789", "5:,", "5:\(Self.one),", "5:,\(Self.one)", "5:\(Self.one)=",
            "5:\(Self.one)=+1", "5: \(Self.one)", "5:\(Self.one.replacingOccurrences(of: "-", with: ""))", "5:\(Self.one)=1=2",
        ] {
            #expect(throws: ServerError.self, "\(text)") { try PullCursor(text: text) }
        }
    }

    /// The parser reads bytes since attack finding 6 of stop 49 (a forged cursor of 100,000 entries cost
    /// seconds of CPU through `String` splits and sscanf): over generated cursors and their one-character
    /// edits, it reads exactly the text the API document's pattern admits, each entry at its position.
    @Test("Generated cursors and their edits: read exactly when the document's pattern admits them, each project at its position", arguments: 0..<4)
    func generatedCursorsFollowThePattern(seed: UInt64) async throws {
        let document = try await YAMLNode.parse(contentsOf: try APIDocument.path())
        let pattern = try #require(document["components"]?["schemas"]?["PullRequest"]?["properties"]?["cursor"]?["pattern"]?.text)
        let regex = try NSRegularExpression(pattern: pattern)
        func admitted(_ text: String) -> Bool {
            regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
        }
        var random = SeededGenerator(seed: seed)
        let alphabet = Array("0123456789abcdefABCDEF-:=,x ")
        for _ in 0..<400 {
            let base = Int64.random(in: 0...999_999, using: &random)
            var expected: [UUID: Int64] = [:]
            var entries: [String] = []
            for _ in 0..<Int.random(in: 0...6, using: &random) {
                let id = UUID()
                let text = Bool.random(using: &random) ? id.uuidString : id.uuidString.lowercased()
                if Bool.random(using: &random) {
                    let at = Int64.random(in: 0...999_999_999, using: &random)
                    entries.append("\(text)=\(at)")
                    expected[id] = at
                } else {
                    entries.append(text)
                    expected[id] = base
                }
            }
            let text = entries.isEmpty && Bool.random(using: &random) ? "\(base)" : "\(base):" + entries.joined(separator: ",")
            let cursor = try PullCursor(text: text)
            for (id, at) in expected { #expect(cursor.position(of: id) == at, "\(text)") }
            #expect(cursor.startsFresh(UUID()) == text.contains(":"), "\(text)")
            // One character inserted, removed or replaced: read exactly when the pattern admits it.
            var edited = Array(text)
            let at = Int.random(in: 0...edited.count, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: edited.insert(alphabet.randomElement(using: &random)!, at: at)
            case 1: if at < edited.count { edited.remove(at: at) }
            default: if at < edited.count { edited[at] = alphabet.randomElement(using: &random)! }
            }
            let editedText = String(edited)
            #expect(((try? PullCursor(text: editedText)) != nil) == admitted(editedText), "\(editedText)")
        }
    }

    @Test("A Content-Range outside the pattern is 400; one of its form whose bounds do not fit is 409 range_mismatch")
    func contentRanges() throws {
        #expect(try ContentRange(header: "bytes 0-9/10") == ContentRange(first: 0, length: 10, total: 10))
        #expect(try ContentRange(header: "bytes */0") == ContentRange(first: 0, length: 0, total: 0))
        for header in ["", "bytes ", "bytes +0-9/10", "bytes 0-9/", "bytes 0-9/+10", "bytes 0-1234567890123456789/10", "bits 0-9/10", "bytes 0-9-1/10"] {
            let error = #expect(throws: ServerError.self, "\(header)") { try ContentRange(header: header) }
            #expect(error?.wireCode == .invalidRequest, "\(header)")
        }
        for header in ["bytes 5-3/10", "bytes 0-10/10", "bytes */5", "bytes 0-0/0"] {
            let error = #expect(throws: ServerError.self, "\(header)") { try ContentRange(header: header) }
            #expect(error?.wireCode == .rangeMismatch, "\(header)")
        }
    }
}
