import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// `fieldMerge` on 1,000,000 record pairs of 20 fields each, against a plain overwrite of the same
/// dictionaries without clocks (the cheapest possible "merge"), measured in the same run.
struct ConflictMergeBenchmark: BenchmarkSuite {
    let name = "conflicts"
    let pairs = 1_000_000
    let fieldCount = 20
    /// Inputs are generated in batches (untimed) so a million pairs never sit in memory at once.
    let batchSize = 100_000

    func run() async throws -> [BenchmarkRow] {
        let names = (0..<fieldCount).map { "field\($0)" }
        let id = UUID()
        let sync = SyncMetadata(version: 1, createdAt: Date(timeIntervalSince1970: 1_795_000_000))
        var random = SplitMix64(seed: 5)
        var mergeSeconds = 0.0
        var overwriteSeconds = 0.0
        var checksum = 0

        for _ in 0..<(pairs / batchSize) {
            let batch: [(VersionedRecord, VersionedRecord)] = (0..<batchSize).map { _ in
                (version(names, id, sync, &random, node: 1), version(names, id, sync, &random, node: 2))
            }
            mergeSeconds += try measureSeconds {
                for (client, server) in batch {
                    checksum &+= try ConflictStrategy.fieldMerge.resolve(client: client, server: server).losingValues.count
                }
            }
            overwriteSeconds += measureSeconds {
                for (client, server) in batch {
                    var merged = server.record.fields
                    for (field, value) in client.record.fields { merged[field] = value }
                    checksum &+= merged.count
                }
            }
        }
        precondition(checksum != 0)

        let records = Double(pairs)
        let fieldMerges = records * Double(fieldCount)
        return [
            BenchmarkRow(
                metric: "fieldMerge, \(pairs.formatted()) pairs × \(fieldCount) fields", value: records / mergeSeconds,
                unit: "records/s", peer: "plain dictionary overwrite, no clocks",
                peerValue: records / overwriteSeconds),
            BenchmarkRow(
                metric: "fieldMerge, field merges per second (one core)", value: fieldMerges / mergeSeconds,
                unit: "fields/s", peer: "plain dictionary overwrite, no clocks",
                peerValue: fieldMerges / overwriteSeconds, target: "≥ 1,000,000 field merges/s",
                met: fieldMerges / mergeSeconds >= 1_000_000),
        ]
    }

    /// One side's version: every field written at its own clock, half the values shared with the other side.
    private func version(
        _ names: [String], _ id: UUID, _ sync: SyncMetadata, _ random: inout SplitMix64, node: UInt64
    ) -> VersionedRecord {
        var fields: [String: FieldValue] = [:]
        var clocks: [String: HybridTimestamp] = [:]
        for (index, name) in names.enumerated() {
            let roll = random.next()
            fields[name] = index.isMultiple(of: 2) ? .integer(Int64(index)) : .text("value \(roll % 4)")
            clocks[name] = HybridTimestamp(
                physicalMilliseconds: 1_795_000_000_000 + Int64(roll % 1_000), counter: UInt16(roll >> 60),
                node: NodeID(node))
        }
        let record = EntityRecord(entity: .dailyLog, id: id, fields: fields, sync: sync)
        return try! VersionedRecord(record: record, clocks: clocks)
    }
}

/// Seeded inputs, so every run merges the same pairs.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
