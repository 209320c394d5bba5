@testable import OutpostWire
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostModels
import OutpostSchema

/// Sample wire values with every optional property set, and helpers shared by the tests.
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

    static let ownRecord = OwnRecord(sequence: 42, entity: .issue, recordID: UUID(), version: 2)

    static let serverRecord = ServerRecord(
        sequence: 42, entity: .issue, recordID: UUID(), serverID: "17", version: 3,
        fields: ["title": .text("Leak"), "projectID": .uuid(projectID)],
        clocks: ["title": clock(1_770_000_000_000), "projectID": clock(1_770_000_000_000)],
        deletion: clock(1_770_000_000_500, counter: 2),
        createdAt: Date(timeIntervalSince1970: 1_770_000_000), updatedAt: Date(timeIntervalSince1970: 1_770_000_000.5))

    static let errorBody = ErrorBody(code: .invalidRequest, message: "'title' must not be empty")

    static let fullMutation = PushMutation(
        idempotencyKey: UUID(), entity: .issue, operation: .delete, recordID: UUID(), serverID: "17", baseVersion: 3,
        fields: ["title": .text("x")], clocks: ["title": clock(1)], deletion: clock(2),
        createdAt: Date(timeIntervalSince1970: 1_770_000_000))

    static let fieldValues: [FieldValue] = [
        .bool(true), .integer(3), .real(1.5), .text("a"), .date(Date(timeIntervalSince1970: 1)), .uuid(UUID()),
        .blob(Data([1, 2])),
    ]

    static let outcomes: [MutationOutcome] = [
        .applied(version: 1, serverID: "8"), .conflict(serverRecord: serverRecord), .rejected(reason: errorBody),
    ]

    /// Every wire type by its schema name in `schemas/sync-api.yaml`, with samples that together use every property.
    static let samplesBySchema: [String: [any Encodable & Sendable]] = [
        "ProbeResponse": [ProbeResponse(status: "live"), ProbeResponse(status: "ready")],
        "HealthResponse": [
            HealthResponse(
                minimumSchemaVersion: 1, maximumSchemaVersion: 5, serverTime: Date(timeIntervalSince1970: 1_770_000_000))
        ],
        "PushRequest": [PushRequest(mutations: [fullMutation], checkpoint: "41.0123456789abcdef")],
        "PushMutation": [fullMutation, createIssue(), SharedClockMutation(mutation: createIssue())],
        "PushResponse": [PushResponse(results: [], checkpoint: "42.0123456789abcdef"), PushResponse(results: [], keepsEveryAnswer: true)],
        "MutationResult": (outcomes + [.duplicate(original: outcomes[0])]).map {
            MutationResult(idempotencyKey: UUID(), outcome: $0)
        } + [MutationResult(idempotencyKey: UUID(), outcome: .applied(version: 3, serverID: nil), sequence: 41)],
        "MutationOutcome": outcomes,
        "PushAnswersRequest": [PushAnswersRequest(idempotencyKeys: [UUID()])],
        "PullRequest": [
            PullRequest(cursor: "12", limit: 100, projects: [projectID]),
            PullRequest(cursor: nil, limit: 5, acceptsSharedClock: false, checkpoint: "0"),
            PullRequest(
                cursor: nil, limit: 5, bundlePositions: ["\(projectID.uuidString.lowercased())=42.0123456789abcdef"],
                ownSequences: ["3-40", "42"]),
            PullRequest(cursor: "12", limit: 5, rereadProjects: [projectID]),
        ],
        "PullResponse": [
            PullResponse(changes: [serverRecord], nextCursor: "42", hasMore: true, checkpoint: "42.0123456789abcdef"),
            PullResponse(changes: [], nextCursor: "43", hasMore: false, leftProjects: [UUID()]),
            PullResponse(changes: [], nextCursor: "44", hasMore: false, ownRecords: [ownRecord]),
            PullResponse(changes: [], nextCursor: "45", hasMore: true, rereadProjects: [projectID]),
        ],
        "OwnRecord": [ownRecord],
        "ServerRecord": [serverRecord, SharedClockRecord(record: serverRecord)],
        "MediaUploadStatus": [
            MediaUploadStatus(attachmentID: UUID(), receivedBytes: 10, totalBytes: 20, complete: false),
            MediaUploadStatus(attachmentID: UUID(), receivedBytes: 20, totalBytes: 20, complete: true, checkpoint: "12.0123456789abcdef"),
        ],
        "ErrorBody": [errorBody],
        "FieldValue": fieldValues,
    ]

    /// The top-level keys of `value`'s JSON encoding.
    static func jsonKeys(of value: any Encodable) throws -> Set<String> {
        let data = try (value as? SharedClockMutation)?.json() ?? WireCoding.encoder().encode(value)
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [] }
        return Set(object.keys)
    }

    /// `schemas/sync-api.yaml`, found by walking up from this file to the workspace root.
    static func syncAPIPath(from file: String = #filePath) throws -> String {
        var directory = URL(fileURLWithPath: file).deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("schemas/sync-api.yaml")
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate.path }
            directory.deleteLastPathComponent()
        }
        throw CocoaError(.fileNoSuchFile)
    }
}

/// A record as a pull page carries it for a client that accepts a shared clock: `clock` for the clock
/// most fields carry (two at least, or the only one), and in `clocks` only the others. The server's
/// `PullPage` writes this form; no type of this package encodes it, so the tests write it to read it back.
struct SharedClockRecord: Encodable, Sendable {
    let record: ServerRecord

    /// The clock to send once, and the clocks of the fields that carry another.
    var sharedClock: (shared: HybridTimestamp, others: [String: HybridTimestamp])? {
        var counts: [HybridTimestamp: Int] = [:]
        for clock in record.clocks.values { counts[clock, default: 0] += 1 }
        guard let best = counts.max(by: { ($0.value, $1.key) < ($1.value, $0.key) }),
            best.value >= min(2, record.clocks.count)
        else { return nil }
        return (best.key, record.clocks.filter { $0.value != best.key })
    }

    private enum Keys: String, CodingKey {
        case sequence, entity, recordID, serverID, version, fields, clocks, clock, deleted, deletion, createdAt, updatedAt
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(record.sequence, forKey: .sequence)
        try container.encode(record.entity, forKey: .entity)
        try container.encode(record.recordID, forKey: .recordID)
        try container.encodeIfPresent(record.serverID, forKey: .serverID)
        try container.encode(record.version, forKey: .version)
        try container.encode(record.fields, forKey: .fields)
        if let sharedClock {
            try container.encode(sharedClock.shared, forKey: .clock)
            if !sharedClock.others.isEmpty { try container.encode(sharedClock.others, forKey: .clocks) }
        } else {
            try container.encode(record.clocks, forKey: .clocks)
        }
        try container.encode(record.isDeleted, forKey: .deleted)
        try container.encodeIfPresent(record.deletion, forKey: .deletion)
        try container.encode(Timestamp.string(from: record.createdAt), forKey: .createdAt)
        try container.encode(Timestamp.string(from: record.updatedAt), forKey: .updatedAt)
    }
}

/// A push mutation as a push to a server that reads the form writes it (`PushRequest.json(sharingClocks:)`):
/// its one clock once, as `clock`. No `Codable` conformance writes that form.
struct SharedClockMutation: Encodable, Sendable {
    let mutation: PushMutation

    /// The mutation's JSON object, cut from a batch of one written in that form.
    func json() throws -> Data {
        let batch = try PushRequest(mutations: [mutation]).json(sharingClocks: true)
        guard let object = try JSONSerialization.jsonObject(with: batch) as? [String: [Any]],
            let first = object["mutations"]?.first
        else { throw CocoaError(.coderReadCorrupt) }
        return try JSONSerialization.data(withJSONObject: first)
    }

    /// `Encoder`s write only the long form; this sample is written by `json()`.
    func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(mutation, .init(codingPath: [], debugDescription: "written by json() only"))
    }
}

/// A pull page with its records in the shared-clock form where they allow it.
struct SharedClockPage: Encodable, Sendable {
    let page: PullResponse

    private enum Keys: String, CodingKey { case changes, hasMore, nextCursor }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(page.changes.map(SharedClockRecord.init), forKey: .changes)
        try container.encode(page.hasMore, forKey: .hasMore)
        try container.encode(page.nextCursor, forKey: .nextCursor)
    }
}
