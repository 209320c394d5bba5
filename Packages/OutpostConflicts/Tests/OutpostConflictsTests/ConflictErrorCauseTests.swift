import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// A `ConflictError` keeps the error that caused it as a value, and compares without it. The conflict
/// code wraps no other library's error today, so this builds one as a caller would.
@Suite(.fieldService) struct ConflictErrorCauseTests {
    /// A cause that is neither Equatable nor Hashable, as most are.
    private struct Cause: Error { let detail: String }

    @Test func aCauseIsKeptAndLeftOutOfEqualityHashingAndDescription() throws {
        let id = UUID()
        let withCause = ConflictError(
            .invalidClockEncoding, entity: .issue, id: id, field: "status", message: "not a clock",
            underlying: Cause(detail: "read from the wire"))
        let without = ConflictError(.invalidClockEncoding, entity: .issue, id: id, field: "status", message: "not a clock")
        #expect((withCause.underlying as? Cause)?.detail == "read from the wire")
        #expect(without.underlying == nil)
        #expect(withCause == without && Set([withCause, without]).count == 1)
        #expect(withCause.description == without.description)
        #expect(withCause != ConflictError(.missingClock, entity: .issue, id: id, field: "status", message: "not a clock"))

        // A real refusal carries no cause: nothing else raised it.
        let refused = try #require(throws: ConflictError.self) { try HybridTimestamp(encoded: "not a clock") }
        #expect(refused.code == .invalidClockEncoding && refused.underlying == nil)
    }
}
