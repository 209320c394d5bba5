import Foundation
@testable import OutpostSchema
import Testing

/// `FieldKind.holds` is the shape check's kind test: it must say what comparing the names says.
@Suite struct FieldKindTests {
    @Test func holdsAgreesWithTheStorageKindsName() {
        let kinds: [FieldKind] = [.text, .integer, .real, .bool, .date, .uuid, .blob, .money, .count, .quantity, .day, .sha256, .choice(["a"])]
        let values: [FieldValue] = [
            .bool(true), .integer(1), .real(1.5), .text("a"), .date(Date(timeIntervalSince1970: 0)), .uuid(UUID()), .blob(Data([1])),
        ]
        for kind in kinds {
            for value in values {
                #expect(kind.holds(value) == (value.kindName == kind.storageKind), "\(kind) \(value)")
            }
            #expect(values.contains { kind.holds($0) }, "\(kind) holds some value")
        }
    }
}
