import Foundation
import OutpostConflicts
import OutpostSchema

/// The store's JSON shapes, written with the one `JSONWriter` (OutpostModels) for what every local
/// write stores: the queued payload, the field clocks, the audit encoding. `JSONEncoder` cost more than
/// everything else in a write together; the writer writes the same bytes `JSONEncoder` would (keys
/// sorted, `FieldValue` as one-key objects, clocks as their fixed-width text), so `JSONDecoder` still
/// reads every column back unchanged.
extension JSONWriter {
    /// A field value, a value with no JSON form (a non-finite number) refused as an invalid record.
    mutating func storedValue(_ value: FieldValue) throws(StoreError) {
        do {
            try self.value(value)
        } catch {
            throw StoreError(.invalidRecord, path: "", message: "\(error.message): it cannot be stored", underlying: error)
        }
    }

    /// A record's fields (`{"name":value,…}`, keys sorted), refused as `storedValue` refuses a value.
    mutating func storedFields(_ fields: [String: FieldValue]) throws(StoreError) {
        do {
            try self.fields(fields)
        } catch {
            throw StoreError(.invalidRecord, path: "", message: "\(error.message): it cannot be stored", underlying: error)
        }
    }

    /// Clocks by field name, keys sorted, each as its text.
    mutating func clocks(_ clocks: [String: HybridTimestamp]) {
        object(clocks) { (json: inout JSONWriter, clock: HybridTimestamp) in json.string(clock.encoded) }
    }

    /// Clocks as `{clock: [names]}`: groups in clock order (the order of their text too), names sorted.
    /// A record's fields usually share one or two clocks (a write stamps every field it changes alike).
    mutating func groupedByClock(_ clocks: [String: HybridTimestamp]) {
        raw("{")
        if let first = clocks.first?.value, clocks.values.allSatisfy({ $0 == first }) {
            string(first.encoded)
            raw(":")
            strings(clocks.keys.sorted())
        } else {
            var groups: [HybridTimestamp: [String]] = [:]
            for (name, clock) in clocks { groups[clock, default: []].append(name) }
            for (index, clock) in groups.keys.sorted().enumerated() {
                if index > 0 { raw(",") }
                string(clock.encoded)
                raw(":")
                strings(groups[clock]!.sorted())
            }
        }
        raw("}")
    }

    mutating func strings(_ values: [String]) {
        raw("[")
        for (index, value) in values.enumerated() {
            if index > 0 { raw(",") }
            string(value)
        }
        raw("]")
    }

}

extension MutationQueue.Payload {
    /// The `payload` column: `{"clock":…` (one clock for every field) or `{"clocks":…` (per field),
    /// then `"deletion":…,"fields":…}`, as `Payload.read` reads it back. With `fieldsInAudit`,
    /// `"fieldsInAudit":true` stands for the fields, which the row's audit entry holds. A revival's
    /// write also holds `"carried"` (first), `"deleteUnseen"` and `"revives"` (last); a write sent again
    /// after a server restore, `"resent"`.
    func encoded(fieldsInAudit: Bool = false) throws -> String {
        var json = JSONWriter()
        json.raw("{")
        // Keys in sorted order, as everywhere in the stored forms.
        if !carried.isEmpty {
            json.raw("\"carried\":")
            json.strings(carried.sorted())
            json.raw(",")
        }
        if let shared = sharedClock {
            json.raw("\"clock\":")
            json.string(shared.encoded)
        } else {
            json.raw("\"clocks\":")
            json.clocks(clocks)
        }
        if deleteUnseen { json.raw(",\"deleteUnseen\":true") }
        if let deletion {
            json.raw(",\"deletion\":")
            json.string(deletion.encoded)
        }
        if fieldsInAudit {
            json.raw(",\"fieldsInAudit\":true")
        } else {
            json.raw(",\"fields\":")
            try json.storedFields(fields)
        }
        if !followedAhead.isEmpty {
            json.raw(",\"followedAhead\":{")
            for (index, (field, ahead)) in followedAhead.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { json.raw(",") }
                json.string(field)
                json.raw(":{\"at\":")
                json.integer(ahead.at)
                if let floor = ahead.floor {
                    json.raw(",\"floor\":")
                    json.string(floor.encoded)
                }
                json.raw("}")
            }
            json.raw("}")
        }
        if resent { json.raw(",\"resent\":true") }
        if let revives {
            json.raw(",\"revives\":")
            json.string(revives.encoded)
        }
        json.raw("}")
        return json.text
    }
}

extension FieldClocks.Stored {
    /// The `clocks` column of `field_clocks` for a record of `entity`.
    func encoded(for entity: EntityType) throws -> String {
        // The row of nearly every record: one clock for every catalog field, the server's the same, and
        // nothing else (`compactFormMarker`). `server == fields` first: a pulled record's two are one
        // dictionary, which Swift compares without a lookup (shared storage); told instead by each
        // side's shared clock, a pulled page applied about 5% slower (`outpost-bench pull`, alternated).
        if deletion == nil, pulled == nil, written == nil, deferredTombstone == nil, heldVersion == nil,
            server == fields, let shared = Self.allFieldsClock(of: fields, entity)
        {
            return Self.compactForm(of: shared)
        }
        var json = JSONWriter(capacity: 128)
        json.raw("{")
        if let deletion {
            json.raw("\"deletion\":")
            json.string(deletion.encoded)
            json.raw(",")
        }
        if let shared = Self.allFieldsClock(of: fields, entity) {
            json.raw("\"allFieldsAt\":")
            json.string(shared.encoded)
        } else {
            json.raw("\"byClock\":")
            json.groupedByClock(fields)
        }
        let histories: [(StaticString, [String: [FieldClocks.PulledChange]]?)] = [(",\"pulled\":", pulled), (",\"written\":", written)]
        for (key, history) in histories {
            guard let history else { continue }
            json.raw(key)
            try json.object(history) { json, changes in
                json.raw("[")
                for (index, change) in changes.enumerated() {
                    if index > 0 { json.raw(",") }
                    json.raw("{\"previous\":")
                    try json.storedValue(change.previous ?? .null)
                    json.raw(",\"since\":")
                    json.integer(change.since)
                    json.raw(",\"version\":")
                    json.integer(change.version)
                    json.raw("}")
                }
                json.raw("]")
            }
        }
        if let deferredTombstone {
            json.raw(",\"deferredTombstone\":{\"deletion\":")
            json.string(deferredTombstone.deletion.encoded)
            json.raw(",\"version\":")
            json.integer(deferredTombstone.version)
            json.raw("}")
        }
        if let heldVersion {
            json.raw(",\"heldVersion\":")
            json.integer(heldVersion)
        }
        if let server {
            if server == fields {
                json.raw(",\"serverAsFields\":true")
            } else {
                json.raw(",\"serverByClock\":")
                json.groupedByClock(server)
            }
        }
        json.raw("}")
        return json.text
    }
}
