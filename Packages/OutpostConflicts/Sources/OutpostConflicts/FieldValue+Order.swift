import Foundation
import OutpostSchema

extension FieldValue {
    /// A total order on values, used only to break a tie between two different values stamped with the
    /// very same clock (which a correct clock never produces), so that merging stays commutative.
    static func precedes(_ lhs: FieldValue, _ rhs: FieldValue) -> Bool {
        let (left, right) = (lhs.rank, rhs.rank)
        if left != right { return left < right }
        switch (lhs, rhs) {
        case (.bool(let a), .bool(let b)): return !a && b
        case (.integer(let a), .integer(let b)): return a < b
        case (.real(let a), .real(let b)): return a.bitPattern < b.bitPattern
        case (.text(let a), .text(let b)): return a.utf8.lexicographicallyPrecedes(b.utf8)
        case (.date(let a), .date(let b)):
            return a.timeIntervalSince1970.bitPattern < b.timeIntervalSince1970.bitPattern
        case (.uuid(let a), .uuid(let b)): return withUnsafeBytes(of: a.uuid) { left in
                withUnsafeBytes(of: b.uuid) { right in left.lexicographicallyPrecedes(right) }
            }
        case (.blob(let a), .blob(let b)): return a.lexicographicallyPrecedes(b)
        default: return false
        }
    }

    private var rank: Int {
        switch self {
        case .null: 0
        case .bool: 1
        case .integer: 2
        case .real: 3
        case .text: 4
        case .date: 5
        case .uuid: 6
        case .blob: 7
        }
    }
}
