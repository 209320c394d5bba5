import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostTesting


/// Fixed values and random versions of one record, drawn from small ranges so equal clocks,
/// equal values and node-id ties come up often.
enum Fixtures {
    static let id = UUID(uuidString: "0C0F11C7-0000-4000-8000-000000000005")!
    static let epoch: Int64 = 1_795_000_000_000
    static let fieldNames = (0..<8).map { "f\($0)" }
    static let deviceA = NodeID(0xA)
    static let deviceB = NodeID(0xB)
    static let server = NodeID(0x5)

    static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    static func clock(_ offset: Int64, _ counter: UInt16 = 0, node: NodeID = deviceA) -> HybridTimestamp {
        HybridTimestamp(physicalMilliseconds: epoch + offset, counter: counter, node: node)
    }

    static func sync(version: Int64 = 1) -> SyncMetadata {
        SyncMetadata(version: version, createdAt: date(epoch), syncStatus: .synced)
    }

    /// A record of `fields`, every one stamped at `clock`.
    static func version(
        _ fields: [String: FieldValue], at clock: HybridTimestamp, version: Int64 = 1, entity: EntityType = .dailyLog
    ) -> VersionedRecord {
        VersionedRecord(
            record: EntityRecord(entity: entity, id: id, fields: fields, sync: sync(version: version)), stampedAt: clock)
    }

    static func randomClock(_ random: inout SeededGenerator) -> HybridTimestamp {
        HybridTimestamp(
            physicalMilliseconds: epoch + Int64.random(in: 0..<6, using: &random),
            counter: UInt16.random(in: 0..<2, using: &random), node: NodeID(UInt64.random(in: 1...3, using: &random)))
    }

    static func randomValue(_ random: inout SeededGenerator) -> FieldValue {
        switch Int.random(in: 0..<5, using: &random) {
        case 0: .null
        case 1: .integer(Int64.random(in: 0..<3, using: &random))
        case 2: .text(["a", "b", "ü"].randomElement(using: &random)!)
        case 3: .bool(Bool.random(using: &random))
        default: .real([0.5, -0.0, 0.0].randomElement(using: &random)!)
        }
    }

    /// A random version: every field (`whole`) or a random subset, sometimes deleted after its newest field.
    static func randomVersion(_ random: inout SeededGenerator, whole: Bool) -> VersionedRecord {
        var fields: [String: FieldValue] = [:]
        var clocks: [String: HybridTimestamp] = [:]
        for name in fieldNames where whole || Bool.random(using: &random) {
            fields[name] = randomValue(&random)
            clocks[name] = randomClock(&random)
        }
        var sync = sync(version: Int64.random(in: 0..<3, using: &random))
        sync.syncStatus = SyncStatus.allCases.randomElement(using: &random)!
        sync.isOrphaned = Int.random(in: 0..<8, using: &random) == 0
        sync.updatedAt = date(epoch + Int64.random(in: 0..<6, using: &random))
        sync.serverID = Bool.random(using: &random) ? nil : ["7", "8"].randomElement(using: &random)
        var deletion: HybridTimestamp?
        if Int.random(in: 0..<4, using: &random) == 0 {
            let newest = clocks.values.max() ?? randomClock(&random)
            deletion = HybridTimestamp(
                physicalMilliseconds: newest.physicalMilliseconds + Int64.random(in: 1...3, using: &random),
                counter: 0, node: NodeID(UInt64.random(in: 1...3, using: &random)))
        }
        let record = EntityRecord(entity: .dailyLog, id: id, fields: fields, sync: sync)
        return try! VersionedRecord(record: record, clocks: clocks, deletion: deletion)
    }
}

extension ConflictStrategy {
    /// Merges in a test, where mismatched records are a bug in the test itself.
    func merge(_ client: VersionedRecord, _ server: VersionedRecord) -> VersionedRecord {
        try! resolve(client: client, server: server).merged
    }
}
