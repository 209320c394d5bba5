import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// A record row as stored, its fields and clocks still the JSON text they were written as: what pull
/// and bundles read, so a record that only travels on is never decoded.
struct StoredRow: Sendable, Hashable {
    var entity: EntityType
    var id: UUID
    var serverID: Int64?
    var projectID: UUID?
    var ownerID: UUID
    var version: Int64
    var sequence: Int64
    /// `{"name":{"kind":value},…}`, keys sorted (the wire's form).
    var fieldsJSON: String
    /// `{"name":"clock",…}`, keys sorted.
    var clocksJSON: String
    /// The deletion clock's encoded text, for a tombstone.
    var deletion: String?
    var createdAt: Int64
    var updatedAt: Int64

    var key: RecordKey { RecordKey(entity: entity, id: id) }

    /// The record as a bundle carries it: its fields left as stored, for the encoder to read
    /// (`BundleEntry`), its clocks never read (a bundle has none; decoding them was a third of streaming
    /// one, `perf`). For a live row: a tombstone's deletion is not read either.
    var bundleEntry: BundleEntry {
        BundleEntry(
            EntityRecord(
                entity: entity, id: id, fields: [:],
                sync: SyncMetadata(
                    serverID: serverID.map(String.init), version: version, createdAt: Date(milliseconds: createdAt),
                    updatedAt: Date(milliseconds: updatedAt), deletedAt: nil, syncStatus: .synced)),
            wireFields: fieldsJSON)
    }

    /// The record with its fields and clocks decoded.
    func decoded() throws(ServerError) -> StoredRecord {
        do {
            // `JSONReader`, not `JSONDecoder`, as for the fields: several times faster on this flat JSON.
            var clocks: [String: HybridTimestamp] = [:]
            var clockReader = JSONReader(Data(clocksJSON.utf8))
            try clockReader.beginObject()
            while let field = try clockReader.nextKey() { clocks[field] = try HybridTimestamp(encoded: clockReader.string()) }
            try clockReader.expectEnd()
            return StoredRecord(
                entity: entity, id: id, serverID: serverID, projectID: projectID, ownerID: ownerID, version: version,
                sequence: sequence, fields: try storedFields(), clocks: clocks,
                deletion: try deletion.map { text throws in try HybridTimestamp(encoded: text) },
                createdAt: Date(milliseconds: createdAt), updatedAt: Date(milliseconds: updatedAt))
        } catch let error as ServerError {
            throw error
        } catch {
            throw unreadable(error)
        }
    }

    /// The member records among `rows` that read. One whose fields do not (only a damaged or restored
    /// database holds one: a push is refused such values) gives its member no role in its project, and
    /// stops no one else: each request reads the member records of all the caller's projects, and one
    /// that threw answered 500 to every route of every member of that project (attack 71, finding 1).
    static func readableMemberRecords(_ rows: [StoredRow]) -> [StoredRecord] {
        rows.compactMap { try? $0.decoded() }
    }

    /// The stored fields, decoded: what both forms above read.
    private func storedFields() throws(ServerError) -> [String: FieldValue] {
        do {
            return try JSONReader.wholeFields(of: fieldsJSON)
        } catch {
            throw unreadable(error)
        }
    }

    private func unreadable(_ error: any Error) -> ServerError {
        ServerError(
            .databaseFailure, message: "the stored \(entity.rawValue) \(id.storageText) is unreadable: \(error)",
            underlying: error)
    }
}

/// What a pull's answer depends on besides its request: the projects the caller belongs to, and the
/// newest change sequence, which every write moves. While both read the same, a pull reads the same page.
struct PullBasis: Sendable, Hashable {
    var memberships: Set<UUID>
    var newestSequence: Int64
}

/// One page of a pull as a backend read it: rows in sequence order, with (in server-id mode) the
/// summaries of the parents they name. `json` writes the wire's `PullResponse` around the stored JSON.
struct PullPage: Sendable {
    var rows: [StoredRow]
    var nextCursor: PullCursor
    var hasMore: Bool
    /// Projects the request's cursor named whose member the caller no longer is.
    var leftProjects: [UUID] = []
    /// The projects the request asked to read again (`PullResponse.rereadProjects`).
    var rereadProjects: [UUID] = []
    /// The parents the rows name, for server-id references; empty when the server keeps client ids.
    var parents: [RecordKey: RecordSummary] = [:]
    /// What the page was read against, for the read-ahead's check when it is served.
    var basis = PullBasis(memberships: [], newestSequence: 0)

    /// Where a page ends, counted as its rows are read in sequence order: after `limit` rows, or after
    /// the row whose stored fields and clocks bring the page to `maximumBytes` (the first row always
    /// goes, so a pull moves on even past a record bigger than that). Both backends read through it, so
    /// a page of large records (inline thumbnails) is never read, held or sent whole.
    struct Extent {
        let limit: Int
        let maximumBytes: Int
        private(set) var rows = 0
        private var bytes = 0

        init(limit: Int, maximumBytes: Int) {
            self.limit = limit
            self.maximumBytes = maximumBytes
        }

        /// Counts a row of `size` bytes in; false once the page is full (that row is not part of it).
        mutating func admit(size: Int) -> Bool {
            guard rows < limit, bytes < maximumBytes else { return false }
            rows += 1
            bytes += size
            return true
        }
    }

    /// The parents a backend must look up for `rows` in server-id mode (decoding only rows with parents).
    static func parentKeys(of rows: [StoredRow]) throws(ServerError) -> Set<RecordKey> {
        var keys = Set<RecordKey>()
        for row in rows where !row.entity.description.parents.isEmpty {
            let record = try row.decoded()
            for relation in row.entity.description.parents {
                if case .uuid(let id) = record.fields[relation.field] ?? .null {
                    keys.insert(RecordKey(entity: relation.entity, id: id))
                }
            }
        }
        return keys
    }

    /// The answer's JSON, as `JSONEncoder` would write `PullResponse` (keys sorted). Rows go out as
    /// stored; in server-id mode a row naming parents has its references rewritten by `rules`.
    /// With `sharedClock`, a record whose fields mostly carry one clock may send it once, as `clock`,
    /// and only the other fields' clocks in `clocks`.
    ///
    /// A row whose change is one of `ownSequences` (the caller's own pushes made it, so its device holds
    /// that version) goes in `ownRecords` as its sequence, entity, id and version only.
    func json(
        rules: PushRules, sharedClock: Bool, checkpoint: HistoryCheckpoint = .empty, ownSequences: SequenceRanges = SequenceRanges(),
        cursorText: String? = nil
    ) throws(ServerError) -> [UInt8] {
        var json = JSONWriter(capacity: 256 + rows.count * 700)
        json.raw(#"{"changes":["#)
        let page: Set<RecordKey> = rules.assignsServerIDs ? Set(rows.map(\.key)) : []
        var own: [StoredRow] = []
        var written = 0
        for row in rows {
            if ownSequences.contains(row.sequence) {
                own.append(row)
                continue
            }
            if written > 0 { json.raw(",") }
            written += 1
            if row.deletion != nil {
                // A tombstone goes out as its id, version and deletion clock: a deleted issue's "gate code
                // 4471" went to every member, future ones included. The contents stay on the server, for
                // the merge of a member's write to the record (its conflict answer carries them).
                var tombstone = row
                tombstone.clocksJSON = "{}"
                Self.write(tombstone, fields: "{}", clocks: nil, into: &json)
                continue
            }
            var fields = row.fieldsJSON
            if rules.assignsServerIDs, !row.entity.description.parents.isEmpty {
                let wire = rules.wireRecord(try row.decoded(), page: page) { parents[$0] }
                fields = try StoredJSON.fields(wire.fields)
            }
            Self.write(row, fields: fields, clocks: sharedClock ? row.sharedClockPlan : nil, into: &json)
        }
        json.raw(#"],"checkpoint":"#)
        json.string(checkpoint.text)
        json.raw(#","hasMore":"#)
        json.bool(hasMore)
        Self.write(leftProjects, as: "leftProjects", into: &json)
        json.raw(#","nextCursor":"#)
        json.string(cursorText ?? nextCursor.text)
        if !own.isEmpty {
            json.raw(#","ownRecords":["#)
            for (index, row) in own.enumerated() {
                if index > 0 { json.raw(",") }
                json.raw(#"{"entity":"#)
                json.string(row.entity.rawValue)
                json.raw(#","recordID":"#)
                json.string(row.id.uppercasedText)
                json.raw(#","sequence":"#)
                json.integer(row.sequence)
                json.raw(#","version":"#)
                json.integer(row.version)
                json.raw("}")
            }
            json.raw("]")
        }
        Self.write(rereadProjects, as: "rereadProjects", into: &json)
        json.raw("}")
        return json.bytes
    }

    /// `,"<key>":[<ids>]`, left out when `projects` is empty (a later key of the answer's object).
    private static func write(_ projects: [UUID], as key: String, into json: inout JSONWriter) {
        guard !projects.isEmpty else { return }
        json.raw(",")
        json.string(key)
        json.raw(":[")
        for (index, project) in projects.enumerated() {
            if index > 0 { json.raw(",") }
            json.string(project.storageText)
        }
        json.raw("]")
    }

    /// A `ServerRecord` in its `Codable` form, keys sorted; with a plan, `clock` and the other clocks.
    private static func write(_ row: StoredRow, fields: String, clocks plan: SharedClockPlan?, into json: inout JSONWriter) {
        if let plan {
            json.raw(#"{"clock":"#)
            json.json(plan.shared)
            if !plan.others.isEmpty {
                json.raw(#","clocks":{"#)
                for (index, member) in plan.others.enumerated() {
                    if index > 0 { json.raw(",") }
                    json.json(member)
                }
                json.raw("}")
            }
        } else {
            json.raw(#"{"clocks":"#)
            json.json(row.clocksJSON)
        }
        json.raw(#","createdAt":"#)
        json.string(Timestamp.string(from: Date(milliseconds: row.createdAt)))
        json.raw(#","deleted":"#)
        json.bool(row.deletion != nil)
        if let deletion = row.deletion {
            json.raw(#","deletion":"#)
            json.string(deletion)
        }
        json.raw(#","entity":"#)
        json.string(row.entity.rawValue)
        json.raw(#","fields":"#)
        json.json(fields)
        json.raw(#","recordID":"#)
        json.string(row.id.uppercasedText)
        json.raw(#","sequence":"#)
        json.integer(row.sequence)
        if let serverID = row.serverID {
            json.raw(#","serverID":"#)
            json.string(String(serverID))
        }
        json.raw(#","updatedAt":"#)
        json.string(Timestamp.string(from: Date(milliseconds: row.updatedAt)))
        json.raw(#","version":"#)
        json.integer(row.version)
        json.raw("}")
    }
}

/// How a pulled record's clocks go in the shared form: the clock most of its fields carry, once, and
/// the `"name":"clock"` members of the others as stored.
struct SharedClockPlan {
    /// The shared clock's stored JSON string, quotes included.
    var shared: Substring
    /// The members of the fields with another clock, in stored order; empty when every field shares it.
    var others: [Substring]
}

extension StoredRow {
    /// The record's clocks in the shared form, when the stored clocks name the very fields the stored
    /// fields hold, in the same order, and one clock serves two of them or all; else nil. Anything but
    /// the compact form `StoredJSON` writes also gives nil: per-field clocks, never wrong.
    var sharedClockPlan: SharedClockPlan? {
        let plan = clocksJSON.utf8.withContiguousStorageIfAvailable { clocks in
            fieldsJSON.utf8.withContiguousStorageIfAvailable { fields in Self.sharedClock(of: clocks, naming: fields) } ?? nil
        } ?? nil
        guard let plan else { return nil }
        let utf8 = clocksJSON.utf8
        func text(_ range: Range<Int>) -> Substring {
            clocksJSON[utf8.index(utf8.startIndex, offsetBy: range.lowerBound)..<utf8.index(
                utf8.startIndex, offsetBy: range.upperBound)]
        }
        return SharedClockPlan(shared: text(plan.shared), others: plan.others.map(text))
    }

    /// For clocks `{"name":"value",…}` that name, member by member, `fields`' top-level members: the
    /// value most members hold (quotes included) and the other members whole, as byte ranges. Nil if
    /// no value is held twice (for more than one member), or for an empty object or another form.
    static func sharedClock(of clocks: UnsafeBufferPointer<UInt8>, naming fields: UnsafeBufferPointer<UInt8>)
        -> (shared: Range<Int>, others: [Range<Int>])?
    {
        func same(_ one: Range<Int>, _ other: Range<Int>) -> Bool {
            one.count == other.count && memcmp(clocks.baseAddress! + one.lowerBound, clocks.baseAddress! + other.lowerBound, one.count) == 0
        }
        // Most records were written whole, so one clock is on every field: a first pass, which
        // allocates nothing, finds that.
        var first: Range<Int>?, differs = false
        let named = forEachMember(of: clocks, naming: fields) { _, value in
            if let first {
                differs = differs || !same(first, value)
            } else {
                first = value
            }
        }
        guard named, let first else { return nil }
        guard differs else { return (first, []) }
        // Each member's whole text and which distinct value it holds; each distinct value with how many hold it.
        var members: [(member: Range<Int>, value: Int)] = []
        var values: [(value: Range<Int>, count: Int)] = []
        _ = forEachMember(of: clocks, naming: fields) { member, value in
            if let known = values.firstIndex(where: { same($0.value, value) }) {
                values[known].count += 1
                members.append((member, known))
            } else {
                members.append((member, values.count))
                values.append((value, 1))
            }
        }
        guard let shared = values.indices.max(by: { values[$0].count < values[$1].count }),
            values[shared].count >= min(2, members.count)
        else { return nil }
        return (values[shared].value, members.filter { $0.value != shared }.map(\.member))
    }

    /// Calls `body` with each member of `clocks` whole and its value (quotes included), in order, and
    /// returns true, when `clocks` is a compact object of plain strings naming `fields`' top-level
    /// members one by one; false otherwise (an empty object, an escape, another name or order).
    private static func forEachMember(
        of clocks: UnsafeBufferPointer<UInt8>, naming fields: UnsafeBufferPointer<UInt8>,
        _ body: (_ member: Range<Int>, _ value: Range<Int>) -> Void
    ) -> Bool {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        /// The index just past the string that opens at `start`; nil if none does, or it holds an escape.
        func string(at start: Int) -> Int? {
            guard start < clocks.count, clocks[start] == quote else { return nil }
            var index = start + 1
            while index < clocks.count, clocks[index] != quote {
                if clocks[index] == backslash { return nil }
                index += 1
            }
            return index < clocks.count ? index + 1 : nil
        }
        guard clocks.count > 2, clocks[0] == UInt8(ascii: "{") else { return false }
        var names = MemberNames(of: fields)
        var index = 1
        while true {
            guard let keyEnd = string(at: index), keyEnd < clocks.count, clocks[keyEnd] == UInt8(ascii: ":"),
                let valueEnd = string(at: keyEnd + 1), let field = names.next(),
                field.count == keyEnd - index,
                memcmp(fields.baseAddress! + field.lowerBound, clocks.baseAddress! + index, field.count) == 0,
                valueEnd < clocks.count
            else { return false }
            body(index..<valueEnd, keyEnd + 1..<valueEnd)
            switch clocks[valueEnd] {
            case UInt8(ascii: ","): index = valueEnd + 1
            case UInt8(ascii: "}"): return valueEnd == clocks.count - 1 && names.next() == nil
            default: return false
            }
        }
    }

    /// The names of a JSON object's top-level members in order, as their raw text (quotes included):
    /// the strings that open right after its `{` or a `,` at its level. The object is taken as well formed.
    struct MemberNames {
        let json: UnsafeBufferPointer<UInt8>
        private var index = 0, depth = 0
        private var keyNext = false

        init(of json: UnsafeBufferPointer<UInt8>) {
            self.json = json
        }

        mutating func next() -> Range<Int>? {
            while index < json.count {
                let byte = json[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    let start = index - 1
                    skipString()
                    if depth == 1, keyNext {
                        keyNext = false
                        return start..<index
                    }
                    keyNext = false
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    keyNext = depth == 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                case UInt8(ascii: ","): keyNext = depth == 1
                default: break
                }
            }
            return nil
        }

        /// Moves past the string whose opening quote was just read: to the first quote after it that an
        /// odd run of backslashes does not escape (found with `memchr`, as field values can be long).
        private mutating func skipString() {
            let start = index
            while index < json.count {
                guard let found = memchr(json.baseAddress! + index, Int32(UInt8(ascii: "\"")), json.count - index) else {
                    index = json.count
                    return
                }
                let end = json.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                index = end + 1
                var backslashes = 0
                while end - backslashes - 1 >= start, json[end - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
                if backslashes.isMultiple(of: 2) { return }
            }
        }
    }
}
