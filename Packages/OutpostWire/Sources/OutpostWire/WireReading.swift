import Foundation
import OutpostConflicts
import OutpostSchema

/// The wire's batches read with `JSONReader` and written with `JSONWriter` instead of `JSONDecoder`
/// and `JSONEncoder`: a pull page of 500 records through `JSONDecoder` cost more than applying it to
/// the store, and a push batch's coding on both ends more than the server's writes (this package's
/// README). The `Codable` conformances stay, for tests and other clients.
public protocol WireReadable {
    /// Reads one value of this type from `reader`, failing on anything `JSONDecoder` would refuse (and
    /// on a few things it takes; see `PushRequest(json:)`).
    init(reading reader: inout JSONReader) throws(JSONReaderError)
}

extension WireReadable {
    /// The value of a whole document.
    public init(wire data: Data) throws(JSONReaderError) {
        try self.init(wire: [UInt8](data))
    }

    /// The value of a whole document held as bytes, read where they are: how a device reads an answer
    /// it collected, with no second copy of a page of up to 20 MiB beside the values read from it.
    public init(wire bytes: [UInt8]) throws(JSONReaderError) {
        var reader = JSONReader(bytes: bytes)
        self = try Self(reading: &reader)
        try reader.expectEnd()
    }
}

extension Array where Element: WireReadable {
    /// A JSON array of such values.
    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        self = []
        try reader.beginArray()
        while try reader.nextElement() { append(try Element(reading: &reader)) }
    }
}

extension PushRequest: WireReadable {
    /// Reads a batch from the wire's JSON several times faster than `JSONDecoder`, for servers. It is
    /// stricter in a few corners: a field value with a key besides its kind, a repeated field name or
    /// member (`JSONDecoder` keeps the first of a repeated member), nesting deeper than 64 levels and
    /// numbers longer than 64 characters are refused.
    public init(json data: Data) throws(JSONReaderError) {
        try self.init(wire: data)
    }

    /// A batch for a server that takes at most `limit` mutations, refused at the first mutation past
    /// `limit`, or at the one that passes `maximumFieldsPerBatch`, as it is read: the error's `underlying`
    /// is the `Overflow`. Read whole first, 500 creates of 1,000 unknown fields (6 MB) took a server about
    /// 80 MB each before its count was checked (attack 84, F4).
    public init(wire data: Data, atMost limit: Int) throws(JSONReaderError) {
        var reader = JSONReader(bytes: [UInt8](data))
        try self.init(reading: &reader, atMost: limit)
        try reader.expectEnd()
    }

    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        try self.init(reading: &reader, atMost: .max)
    }

    /// The most fields and clocks a push's mutations hold together (a shared clock counts once for each
    /// field it stamps, as it is held once read): half a pull page's (`PullResponse.maximumFieldsPerPage`),
    /// as a batch is at most 500 mutations and a page 1,000 records. A batch of 500 issues holds about
    /// 10,000; an app whose records declare the most fields there are (1,000) sends about 50 at once
    /// (`SyncEngine` sizes its batches so).
    public static let maximumFieldsPerBatch = 100_000

    /// The bound a push passed while it was read: kept as the refusal's `underlying` value, so that a
    /// server answers it as a batch too large (413) rather than as malformed JSON (400).
    public enum Overflow: Error, Sendable, Hashable {
        /// More mutations than the reader was told the server takes.
        case mutations(Int)
        /// More fields and clocks together than `maximumFieldsPerBatch`.
        case fieldsAndClocks(Int)
    }

    /// The fields and clocks a batch holds together, as `maximumFieldsPerBatch` counts them.
    public var fieldsAndClocks: Int {
        mutations.reduce(0) { $0 + $1.fields.count + $1.clocks.count }
    }

    private init(reading reader: inout JSONReader, atMost limit: Int) throws(JSONReaderError) {
        var mutations: [PushMutation]?
        var checkpoint: String?
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "mutations":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                var read: [PushMutation] = []
                var entries = 0
                try reader.beginArray()
                while try reader.nextElement() {
                    guard read.count < limit else {
                        var refused = reader.error("the push holds more than the \(limit) mutations this server takes")
                        refused.underlying = Overflow.mutations(limit)
                        throw refused
                    }
                    let mutation = try PushMutation(reading: &reader)
                    entries += mutation.fields.count + mutation.clocks.count
                    guard entries <= Self.maximumFieldsPerBatch else {
                        var refused = reader.error("the push holds more than \(Self.maximumFieldsPerBatch) fields and clocks")
                        refused.underlying = Overflow.fieldsAndClocks(Self.maximumFieldsPerBatch)
                        throw refused
                    }
                    read.append(mutation)
                }
                mutations = read
            case "checkpoint":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                checkpoint = try reader.takeNull() ? nil : reader.string()
            default: try reader.skipValue()
            }
        }
        guard let mutations else { throw reader.error("a push needs 'mutations'") }
        self.init(mutations: mutations, checkpoint: checkpoint)
    }

    /// The batch as the wire's JSON, as `JSONEncoder` with sorted keys writes it; with `sharingClocks`,
    /// a mutation whose fields all carry one clock has it once as `clock` instead of `clocks` (only for a
    /// server that names `SyncProtocol.sharedClockForm` in `SyncProtocol.acceptsHeader`).
    public func json(sharingClocks: Bool = false) throws(JSONWriterError) -> Data {
        var writer = JSONWriter(capacity: 512 * mutations.count + 64)
        writer.raw("{")
        if let checkpoint {
            writer.raw(#""checkpoint":"#)
            writer.string(checkpoint)
            writer.raw(",")
        }
        writer.raw(#""mutations":["#)
        for (index, mutation) in mutations.enumerated() {
            if index > 0 { writer.raw(",") }
            try mutation.write(to: &writer, sharingClocks: sharingClocks)
        }
        writer.raw("]}")
        return Data(writer.bytes)
    }
}

extension PushMutation: WireReadable {
    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        var idempotencyKey: UUID?, entity: EntityType?, operation: Operation?, recordID: UUID?, serverID: String?
        var baseVersion: Int64?, fields: [String: FieldValue]?, clocks: [String: HybridTimestamp]?
        var shared: HybridTimestamp?, deletion: HybridTimestamp?, createdAt: Date?
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "idempotencyKey":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                idempotencyKey = try reader.uuid()
            case "entity":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                entity = try ServerRecord.entity(&reader)
            case "operation":
                try reader.firstOccurrence(of: 2, key, in: &seen)
                let name = try reader.string()
                guard let read = Operation(rawValue: name) else { throw reader.error("'\(name)' is not an operation") }
                operation = read
            case "recordID":
                try reader.firstOccurrence(of: 3, key, in: &seen)
                recordID = try reader.uuid()
            case "serverID":
                try reader.firstOccurrence(of: 4, key, in: &seen)
                serverID = try reader.takeNull() ? nil : reader.string()
            case "baseVersion":
                try reader.firstOccurrence(of: 5, key, in: &seen)
                baseVersion = try reader.integer()
            case "fields":
                try reader.firstOccurrence(of: 6, key, in: &seen)
                fields = try reader.fields(expecting: entity?.description.fields.count)
            case "clocks":
                try reader.firstOccurrence(of: 7, key, in: &seen)
                clocks = try ServerRecord.clocks(&reader)
            case "clock":
                try reader.firstOccurrence(of: 10, key, in: &seen)
                shared = try ServerRecord.clock(&reader)
            case "deletion":
                try reader.firstOccurrence(of: 8, key, in: &seen)
                deletion = try reader.takeNull() ? nil : ServerRecord.clock(&reader)
            case "createdAt":
                try reader.firstOccurrence(of: 9, key, in: &seen)
                createdAt = try reader.takeNull() ? nil : ServerRecord.date(&reader)
            default: try reader.skipValue()
            }
        }
        guard let idempotencyKey, let entity, let operation, let recordID, let baseVersion, let fields,
            clocks != nil || shared != nil
        else {
            throw reader.error(
                "a mutation needs 'idempotencyKey', 'entity', 'operation', 'recordID', 'baseVersion', 'fields' and 'clock' or 'clocks'")
        }
        // The form of a pulled record (`ServerRecord`): `clock` for every field `clocks` does not name.
        self.init(
            idempotencyKey: idempotencyKey, entity: entity, operation: operation, recordID: recordID, serverID: serverID,
            baseVersion: baseVersion, fields: fields, clocks: ServerRecord.clocks(of: fields, shared: shared, listed: clocks),
            deletion: deletion, createdAt: createdAt)
    }

    /// Writes the mutation with its keys in sorted order, nil members left out (as `JSONEncoder` does);
    /// with `sharingClocks`, its `sharedClock` (if any) once as `clock`, in place of `clocks`.
    func write(to writer: inout JSONWriter, sharingClocks: Bool = false) throws(JSONWriterError) {
        writer.raw(#"{"baseVersion":"#)
        writer.integer(baseVersion)
        if sharingClocks, let shared = sharedClock {
            writer.raw(#","clock":"#)
            writer.string(shared.encoded)
        } else {
            writer.raw(#","clocks":"#)
            writer.object(clocks) { $0.string($1.encoded) }
        }
        if let createdAt {
            writer.raw(#","createdAt":"#)
            writer.string(Timestamp.string(from: createdAt))
        }
        if let deletion {
            writer.raw(#","deletion":"#)
            writer.string(deletion.encoded)
        }
        writer.raw(#","entity":"#)
        writer.string(entity.rawValue)
        writer.raw(#","fields":"#)
        try writer.fields(fields)
        writer.raw(#","idempotencyKey":"#)
        writer.string(idempotencyKey.uppercasedText)
        writer.raw(#","operation":"#)
        writer.string(operation.rawValue)
        writer.raw(#","recordID":"#)
        writer.string(recordID.uppercasedText)
        if let serverID {
            writer.raw(#","serverID":"#)
            writer.string(serverID)
        }
        writer.raw("}")
    }
}

extension PullResponse: WireReadable {
    /// Reads a page from the wire's JSON several times faster than `JSONDecoder`, for transports of
    /// one's own; stricter in the same corners as `PushRequest(json:)`.
    public init(json data: Data) throws(JSONReaderError) {
        try self.init(wire: data)
    }

    /// A page answering a request for `limit` changes (`PullRequest.limit`), refused at the first change
    /// or own record past `limit` together, as it is read: the server puts no more in a page, and 47,856
    /// small records in one 19.9 MiB page held a device about 194 MB over idle when it had asked for
    /// 1,000 (attack 83).
    public init(wire bytes: [UInt8], atMost limit: Int) throws(JSONReaderError) {
        var reader = JSONReader(bytes: bytes)
        try self.init(reading: &reader, atMost: limit)
        try reader.expectEnd()
    }

    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        try self.init(reading: &reader, atMost: .max)
    }

    private init(reading reader: inout JSONReader, atMost limit: Int) throws(JSONReaderError) {
        var changes: [ServerRecord]?, nextCursor: String?, hasMore: Bool?, checkpoint: String?
        var leftProjects: [UUID] = []
        var ownRecords: [OwnRecord] = []
        var rereadProjects: [UUID] = []
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "changes":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                var read: [ServerRecord] = []
                var entries = 0
                try reader.beginArray()
                while try reader.nextElement() {
                    try Self.check(read.count + ownRecords.count, within: limit, at: reader)
                    let record = try ServerRecord(reading: &reader)
                    entries += record.fields.count + record.clocks.count
                    guard entries <= Self.maximumFieldsPerPage else {
                        throw reader.error("the page holds more than \(Self.maximumFieldsPerPage) fields and clocks")
                    }
                    read.append(record)
                }
                changes = read
            case "nextCursor":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                nextCursor = try reader.string()
            case "hasMore":
                try reader.firstOccurrence(of: 2, key, in: &seen)
                hasMore = try reader.bool()
            case "leftProjects":
                try reader.firstOccurrence(of: 3, key, in: &seen)
                try reader.beginArray()
                while try reader.nextElement() {
                    guard leftProjects.count < Self.maximumLeftProjects else {
                        throw reader.error("the page names more than \(Self.maximumLeftProjects) projects left")
                    }
                    leftProjects.append(try reader.uuid())
                }
            case "checkpoint":
                try reader.firstOccurrence(of: 4, key, in: &seen)
                checkpoint = try reader.takeNull() ? nil : answeredCheckpoint(&reader)
            case "ownRecords":
                try reader.firstOccurrence(of: 5, key, in: &seen)
                try reader.beginArray()
                while try reader.nextElement() {
                    try Self.check(ownRecords.count + (changes?.count ?? 0), within: limit, at: reader)
                    ownRecords.append(try OwnRecord(reading: &reader))
                }
            case "rereadProjects":
                try reader.firstOccurrence(of: 6, key, in: &seen)
                try reader.beginArray()
                while try reader.nextElement() { rereadProjects.append(try reader.uuid()) }
            default: try reader.skipValue()
            }
        }
        guard let changes, let nextCursor, let hasMore else {
            throw reader.error("a pull page needs 'changes', 'nextCursor' and 'hasMore'")
        }
        self.init(
            changes: changes, nextCursor: nextCursor, hasMore: hasMore, leftProjects: leftProjects, checkpoint: checkpoint,
            ownRecords: ownRecords, rereadProjects: rereadProjects)
    }

    /// The most fields and clocks a page's records hold together. A field and its clock take at least
    /// about 49 bytes as the reference server stores them, so its pages of 4 MiB hold at most about
    /// 86,000 of each. Decoded, each costs about a hundred bytes: a thousand records of 990 null fields
    /// and one shared clock, 12 MB of JSON within every other bound, took a device to about 200 MB a page
    /// (attack 84, F1).
    public static let maximumFieldsPerPage = 200_000

    /// The most projects a page names as left (`leftProjects`): the reference server refuses a cursor
    /// naming more than that beyond the caller's projects, so it never names more. A hostile server's
    /// pages of 500,000 random ids each held a device at 797 MB over eight pages (attack 85, F1).
    public static let maximumLeftProjects = 1_000

    /// Refuses one more change or own record where `held` are read already and `limit` were asked for.
    private static func check(_ held: Int, within limit: Int, at reader: JSONReader) throws(JSONReaderError) {
        guard held < limit else { throw reader.error("the page holds more than the \(limit) changes asked for") }
    }
}

extension OwnRecord: WireReadable {
    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        var sequence: Int64?, entity: EntityType?, recordID: UUID?, version: Int64?
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "sequence":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                sequence = try reader.integer()
            case "entity":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                entity = try ServerRecord.entity(&reader)
            case "recordID":
                try reader.firstOccurrence(of: 2, key, in: &seen)
                recordID = try reader.uuid()
            case "version":
                try reader.firstOccurrence(of: 3, key, in: &seen)
                version = try reader.integer()
            default: try reader.skipValue()
            }
        }
        guard let sequence, let entity, let recordID, let version else {
            throw reader.error("an own record needs 'sequence', 'entity', 'recordID' and 'version'")
        }
        self.init(sequence: sequence, entity: entity, recordID: recordID, version: version)
    }
}

extension ServerRecord: WireReadable {
    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        var sequence: Int64?, entity: EntityType?, recordID: UUID?, serverID: String?, version: Int64?
        var fields: [String: FieldValue]?, clocks: [String: HybridTimestamp]?, shared: HybridTimestamp?, deleted: Bool?
        var deletion: HybridTimestamp?, createdAt: Date?, updatedAt: Date?
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "sequence":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                sequence = try reader.integer()
            case "entity":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                entity = try Self.entity(&reader)
            case "recordID":
                try reader.firstOccurrence(of: 2, key, in: &seen)
                recordID = try reader.uuid()
            case "serverID":
                try reader.firstOccurrence(of: 3, key, in: &seen)
                serverID = try reader.takeNull() ? nil : reader.string()
            case "version":
                try reader.firstOccurrence(of: 4, key, in: &seen)
                version = try reader.integer()
            case "fields":
                try reader.firstOccurrence(of: 5, key, in: &seen)
                fields = try reader.fields(expecting: entity?.description.fields.count)
            case "clocks":
                try reader.firstOccurrence(of: 6, key, in: &seen)
                clocks = try Self.clocks(&reader)
            case "clock":
                try reader.firstOccurrence(of: 11, key, in: &seen)
                shared = try Self.clock(&reader)
            case "deleted":
                try reader.firstOccurrence(of: 7, key, in: &seen)
                deleted = try reader.bool()
            case "deletion":
                try reader.firstOccurrence(of: 8, key, in: &seen)
                deletion = try reader.takeNull() ? nil : Self.clock(&reader)
            case "createdAt":
                try reader.firstOccurrence(of: 9, key, in: &seen)
                createdAt = try Self.date(&reader)
            case "updatedAt":
                try reader.firstOccurrence(of: 10, key, in: &seen)
                updatedAt = try Self.date(&reader)
            default: try reader.skipValue()
            }
        }
        guard let sequence, let entity, let recordID, let version, let fields, clocks != nil || shared != nil,
            let deleted, let createdAt, let updatedAt
        else {
            throw reader.error(
                "a record needs 'sequence', 'entity', 'recordID', 'version', 'fields', 'clock' or 'clocks', 'deleted', 'createdAt' and 'updatedAt'")
        }
        // A flag without its clock (or the reverse) cannot be merged safely: refuse rather than guess.
        guard deleted == (deletion != nil) else { throw reader.error("'deleted' and 'deletion' disagree") }
        self.init(
            sequence: sequence, entity: entity, recordID: recordID, serverID: serverID, version: version,
            fields: fields, clocks: Self.clocks(of: fields, shared: shared, listed: clocks), deletion: deletion,
            createdAt: createdAt, updatedAt: updatedAt)
    }

    static func entity(_ reader: inout JSONReader) throws(JSONReaderError) -> EntityType {
        let name = try reader.string()
        guard let type = EntityType(rawValue: name) else { throw reader.error("'\(name)' is not an entity type") }
        return type
    }

    /// `{"field": "clock", …}`; a repeated field is refused.
    static func clocks(_ reader: inout JSONReader) throws(JSONReaderError) -> [String: HybridTimestamp] {
        var clocks: [String: HybridTimestamp] = [:]
        // A clock per field. Not sized by the entity as the fields are: `clocks` sorts before `entity`.
        clocks.reserveCapacity(JSONReader.defaultFieldRoom)
        // Most fields of a record share one write's clock: its text is parsed once, then matched.
        var previous: (text: ArraySlice<UInt8>, clock: HybridTimestamp)?
        try reader.beginObject()
        while let name = try reader.nextKey() {
            guard clocks.count < JSONReader.maximumFields else {
                throw reader.error("a record carries more than \(JSONReader.maximumFields) clocks")
            }
            let clock: HybridTimestamp
            if let text = try reader.plainASCIIString() {
                if let previous, previous.text.elementsEqual(text) {
                    clock = previous.clock
                } else {
                    clock = try Self.clock(text, in: reader)
                    previous = (text, clock)
                }
            } else {
                clock = try self.clock(&reader)
            }
            guard clocks.updateValue(clock, forKey: name) == nil else {
                throw reader.error("the clock of '\(name)' appears twice")
            }
        }
        return clocks
    }

    /// A clock value, parsed from the page's bytes when its text is plain ASCII, as every valid clock is.
    static func clock(_ reader: inout JSONReader) throws(JSONReaderError) -> HybridTimestamp {
        if let text = try reader.plainASCIIString() { return try clock(text, in: reader) }
        return try clock(ArraySlice(try reader.string().utf8), in: reader)
    }

    /// `text` read as a clock; a malformed one is an error where the reader stands, after the value.
    private static func clock(_ text: ArraySlice<UInt8>, in reader: JSONReader) throws(JSONReaderError) -> HybridTimestamp {
        do {
            return try HybridTimestamp(encodedUTF8: text)
        } catch {
            var refused = reader.error(error.description)
            refused.underlying = error
            throw refused
        }
    }

    static func date(_ reader: inout JSONReader) throws(JSONReaderError) -> Date {
        let text = try reader.string()
        guard let date = Timestamp.date(from: text) else { throw reader.error("'\(text)' is not an ISO 8601 timestamp") }
        return date
    }
}

extension PushResponse: WireReadable {
    /// Reads a push's answer: a client's side of the batch. Through `JSONDecoder` it was a tenth of a
    /// push measured end to end (this package's README).
    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        try self.init(reading: &reader, answering: .max)
    }

    /// The answer to a push of `count` mutations, refused while it is read at the first result past
    /// `count` (a server answers each mutation once) or at the conflict whose record passes
    /// `maximumFieldsPerAnswer`: a hostile server's answer of conflicts of 990 null fields each would
    /// hold a device as attack 84's pages did.
    public init(wire bytes: [UInt8], answering count: Int) throws(JSONReaderError) {
        var reader = JSONReader(bytes: bytes)
        try self.init(reading: &reader, answering: count)
        try reader.expectEnd()
    }

    /// The most fields and clocks the records of an answer's conflicts hold together, as a pull page's
    /// (`PullResponse.maximumFieldsPerPage`); the reference server refuses a push whose answer would
    /// carry more (413 `batch_too_large`, the device sends fewer at once).
    public static let maximumFieldsPerAnswer = PullResponse.maximumFieldsPerPage

    private init(reading reader: inout JSONReader, answering count: Int) throws(JSONReaderError) {
        var results: [MutationResult]?
        var checkpoint: String?
        var keepsEveryAnswer: Bool?
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "results":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                var read: [MutationResult] = []
                var entries = 0
                try reader.beginArray()
                while try reader.nextElement() {
                    guard read.count < count else { throw reader.error("the answer holds more results than the \(count) mutations sent") }
                    let result = try MutationResult(reading: &reader)
                    if case .conflict(let record) = result.outcome.unwrapped {
                        entries += record.fields.count + record.clocks.count
                        guard entries <= Self.maximumFieldsPerAnswer else {
                            throw reader.error("the answer's conflicts hold more than \(Self.maximumFieldsPerAnswer) fields and clocks")
                        }
                    }
                    read.append(result)
                }
                results = read
            case "checkpoint":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                checkpoint = try reader.takeNull() ? nil : answeredCheckpoint(&reader)
            case "keepsEveryAnswer":
                try reader.firstOccurrence(of: 2, key, in: &seen)
                keepsEveryAnswer = try reader.takeNull() ? nil : reader.bool()
            default: try reader.skipValue()
            }
        }
        guard let results else { throw reader.error("a push answer needs 'results'") }
        self.init(results: results, checkpoint: checkpoint, keepsEveryAnswer: keepsEveryAnswer)
    }
}

extension MutationResult: WireReadable {
    /// A result is one flat object: the key beside the outcome's members.
    public init(reading reader: inout JSONReader) throws(JSONReaderError) {
        var idempotencyKey: UUID?
        var sequence: Int64?
        var members = OutcomeMembers()
        var seen: UInt64 = 0
        try reader.beginObject()
        while let name = try reader.nextKey() {
            if name == "idempotencyKey" {
                try reader.firstOccurrence(of: 0, name, in: &seen)
                idempotencyKey = try reader.uuid()
            } else if name == "sequence" {
                try reader.firstOccurrence(of: 1, name, in: &seen)
                sequence = try reader.takeNull() ? nil : reader.integer()
            } else {
                try members.read(name, from: &reader)
            }
        }
        guard let idempotencyKey else { throw reader.error("a mutation result needs 'idempotencyKey'") }
        self.init(
            idempotencyKey: idempotencyKey, outcome: try members.outcome(allowingDuplicate: true, reader), sequence: sequence)
    }
}

/// An outcome's members, gathered in whatever order they come, then checked against its `status`
/// as `MutationOutcome(from:)` checks them.
private struct OutcomeMembers {
    /// The members read so far, so a repeated one is refused (see `JSONReader.firstOccurrence`).
    var seen: UInt64 = 0
    var status: String?
    var version: Int64?
    var serverID: String?
    var serverRecord: ServerRecord?
    var reason: ErrorBody?
    var original: MutationOutcome?

    mutating func read(_ name: String, from reader: inout JSONReader) throws(JSONReaderError) {
        switch name {
        case "status":
            try reader.firstOccurrence(of: 0, name, in: &seen)
            status = try reader.string()
        case "version":
            try reader.firstOccurrence(of: 1, name, in: &seen)
            version = try reader.integer()
        case "serverID":
            try reader.firstOccurrence(of: 2, name, in: &seen)
            serverID = try reader.takeNull() ? nil : reader.string()
        case "serverRecord":
            try reader.firstOccurrence(of: 3, name, in: &seen)
            serverRecord = try ServerRecord(reading: &reader)
        case "reason":
            try reader.firstOccurrence(of: 4, name, in: &seen)
            reason = try Self.errorBody(&reader)
        case "original":
            try reader.firstOccurrence(of: 5, name, in: &seen)
            var nested = OutcomeMembers()
            try reader.beginObject()
            while let key = try reader.nextKey() { try nested.read(key, from: &reader) }
            original = try nested.outcome(allowingDuplicate: false, reader)
        default: try reader.skipValue()
        }
    }

    func outcome(allowingDuplicate: Bool, _ reader: JSONReader) throws(JSONReaderError) -> MutationOutcome {
        switch status {
        case "applied":
            guard let version else { throw reader.error("an applied outcome needs 'version'") }
            return .applied(version: version, serverID: serverID)
        case "duplicate" where allowingDuplicate:
            guard let original else { throw reader.error("a duplicate outcome needs 'original'") }
            return .duplicate(original: original)
        case "conflict":
            guard let serverRecord else { throw reader.error("a conflict outcome needs 'serverRecord'") }
            return .conflict(serverRecord: serverRecord)
        case "rejected":
            guard let reason else { throw reader.error("a rejected outcome needs 'reason'") }
            return .rejected(reason: reason)
        default:
            throw reader.error(
                "'\(status ?? "")' is not a mutation status here (applied, duplicate, conflict, rejected; an original is never a duplicate)")
        }
    }

    private static func errorBody(_ reader: inout JSONReader) throws(JSONReaderError) -> ErrorBody {
        var code: String?, message: String?
        var seen: UInt64 = 0
        try reader.beginObject()
        while let key = try reader.nextKey() {
            switch key {
            case "code":
                try reader.firstOccurrence(of: 0, key, in: &seen)
                code = try reader.string()
            case "message":
                try reader.firstOccurrence(of: 1, key, in: &seen)
                message = try reader.string()
            default: try reader.skipValue()
            }
        }
        guard let code, let message else { throw reader.error("a reason needs 'code' and 'message'") }
        return ErrorBody(code: ServerErrorCode(rawValue: code), message: message)
    }
}

/// A checkpoint a server's answer gives, which the device stores and sends back with every request:
/// refused unless of the form the protocol names (`SyncProtocol.isCheckpoint`). A hostile server's
/// 19 MB checkpoint was stored and then sent with every later pull and push (attack 85, F4).
private func answeredCheckpoint(_ reader: inout JSONReader) throws(JSONReaderError) -> String {
    let text = try reader.string()
    guard SyncProtocol.isCheckpoint(text) else {
        throw reader.error("the checkpoint '\(text.prefix(40))' is not of the protocol's form (<sequence>.<16 hex digits>, or 0)")
    }
    return text
}
