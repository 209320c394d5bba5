@testable import OutpostModels
@testable import OutpostSchema
import Foundation
import OutpostFieldServiceTesting
import Testing

/// The package's errors keep the error that caused them as a value, and compare without it. Nothing in
/// OutpostModels wraps another library's error on a path a test can reach (a record's fields cannot fail
/// to read), so these build the errors as a caller would.
@Suite(.fieldService) struct ModelErrorCauseTests {
    /// A cause that is neither Equatable nor Hashable, as most are.
    private struct Cause: Error { let detail: String }

    @Test func aCauseIsKeptAndLeftOutOfEqualityHashingAndDescription() throws {
        let cause = Cause(detail: "the decoder failed")
        let withCause = ModelError(.typeMismatch, entity: .issue, field: "title", message: "not text", underlying: cause)
        let without = ModelError(.typeMismatch, entity: .issue, field: "title", message: "not text")
        #expect((withCause.underlying as? Cause)?.detail == "the decoder failed")
        #expect(without.underlying == nil)
        #expect(withCause == without && Set([withCause, without]).count == 1)
        #expect(withCause.description == without.description)
        #expect(withCause != ModelError(.typeMismatch, entity: .issue, field: "title", message: "other"))

        let reader = JSONReaderError(message: "bad", offset: 3, line: 1, column: 4, underlying: cause)
        #expect(reader.underlying is Cause)
        #expect(reader == JSONReaderError(message: "bad", offset: 3, line: 1, column: 4))
        #expect(reader.hashValue == JSONReaderError(message: "bad", offset: 3, line: 1, column: 4).hashValue)
        #expect(reader != JSONReaderError(message: "bad", offset: 4, line: 1, column: 5))

        let writer = JSONWriterError(message: "nan", underlying: cause)
        #expect(writer.underlying is Cause)
        #expect(writer == JSONWriterError(message: "nan") && Set([writer, JSONWriterError(message: "nan")]).count == 1)
    }
}
