@testable import OutpostSync
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostWire

/// Sample wire values and helpers the engine and transport tests share.
enum Fixtures {
    static let node = NodeID(0xa1)
    static let projectID = UUID(uuidString: "6F1D2A80-0000-4000-8000-000000000001")!

    static func clock(_ milliseconds: Int64, counter: UInt16 = 0) -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: milliseconds, counter: counter, node: node)
    }

    /// A create of an issue, with a field of each common kind.
    static func createIssue(id: UUID = UUID(), key: UUID = UUID(), title: String = "Cracked sill") -> PushMutation {
        let fields: [String: FieldValue] = [
            "projectID": .uuid(projectID), "title": .text(title), "status": .text("open"),
            "priority": .text("high"), "latitude": .real(45.5), "assigneeID": .null,
        ]
        return PushMutation(
            idempotencyKey: key, entity: .issue, operation: .create, recordID: id, baseVersion: 0, fields: fields,
            clocks: fields.mapValues { _ in clock(1_770_000_000_000) })
    }

    static let serverRecord = ServerRecord(
        sequence: 42, entity: .issue, recordID: UUID(), serverID: "17", version: 3,
        fields: ["title": .text("Leak"), "projectID": .uuid(projectID)],
        clocks: ["title": clock(1_770_000_000_000), "projectID": clock(1_770_000_000_000)],
        deletion: clock(1_770_000_000_500, counter: 2),
        createdAt: Date(timeIntervalSince1970: 1_770_000_000), updatedAt: Date(timeIntervalSince1970: 1_770_000_000.5))

    static let errorBody = ErrorBody(code: .invalidRequest, message: "'title' must not be empty")
}

/// A random source that always returns the same value: 0 gives the shortest jittered delay, `.max` the longest.
struct FixedGenerator: RandomNumberGenerator {
    var value: UInt64
    mutating func next() -> UInt64 { value }
}


/// Waits, napping 10 ms at a time, until `condition` holds or `limit` passes.
func eventually(within limit: Duration, _ condition: () async -> Bool) async -> Bool {
    let started = ContinuousClock.now
    while ContinuousClock.now - started < limit {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}

/// Waits, yielding and then napping a millisecond at a time (two seconds at most), until `condition` holds.
func eventually(_ condition: () async -> Bool) async -> Bool {
    for attempt in 0..<2_200 {
        if await condition() { return true }
        if attempt < 200 { await Task.yield() } else { try? await Task.sleep(for: .milliseconds(1)) }
    }
    return false
}
