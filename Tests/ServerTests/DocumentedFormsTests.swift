@testable import OutpostServer
import Foundation
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
