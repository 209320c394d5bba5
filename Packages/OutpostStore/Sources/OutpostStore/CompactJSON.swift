import Foundation
import OutpostConflicts
import OutpostModels

/// A small, deterministic JSON writer for what every local write stores (the queued payload, the field
/// clocks, the audit encoding). `JSONEncoder` cost more than everything else in a write together; this
/// writes the same JSON shapes (`FieldValue` as one-key objects, clocks as their fixed-width text, keys
/// sorted) straight into a byte buffer, so `JSONDecoder` still reads every column back unchanged.
struct CompactJSON {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }
    var data: Data { Data(bytes) }

    mutating func raw(_ literal: StaticString) {
        literal.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Bytes that are already JSON (an encoding written earlier by this writer).
    mutating func append(_ encoded: Data) {
        bytes.append(contentsOf: encoded)
    }

    mutating func integer(_ value: Int64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A JSON string: quotes, backslashes and control characters escaped; everything else as UTF-8.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings (ids, names, clocks) need no escape: copy them in one go.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0..<0x20:
                raw("\\u00")
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A field value in `FieldValue`'s Codable shape: `null` or `{"kind": value}`.
    mutating func value(_ value: FieldValue) throws {
        switch value {
        case .null: raw("null")
        case .bool(let flag):
            raw("{\"bool\":")
            if flag { raw("true") } else { raw("false") }
            raw("}")
        case .integer(let number):
            raw("{\"integer\":")
            integer(number)
            raw("}")
        case .real(let number):
            guard number.isFinite else {
                throw StoreError(.invalidRecord, path: "", message: "\(number) cannot be stored: only finite numbers can")
            }
            raw("{\"real\":")
            bytes.append(contentsOf: "\(number)".utf8)
            raw("}")
        case .text(let text):
            raw("{\"text\":")
            string(text)
            raw("}")
        case .date(let date):
            raw("{\"date\":")
            string(Timestamp.string(from: date))
            raw("}")
        case .uuid(let id):
            raw("{\"uuid\":")
            string(id.uuidString)
            raw("}")
        case .blob(let data):
            raw("{\"blob\":")
            string(data.base64EncodedString())
            raw("}")
        }
    }

    /// An object whose keys are written in sorted order, each value by `body`.
    mutating func object<Value>(_ members: [String: Value], _ body: (inout CompactJSON, Value) throws -> Void) rethrows {
        raw("{")
        for (index, key) in members.keys.sorted().enumerated() {
            if index > 0 { raw(",") }
            string(key)
            raw(":")
            try body(&self, members[key]!)
        }
        raw("}")
    }

    mutating func fields(_ fields: [String: FieldValue]) throws {
        try object(fields) { try $0.value($1) }
    }

    mutating func clocks(_ clocks: [String: HybridTimestamp]) {
        object(clocks) { $0.string($1.encoded) }
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

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

extension MutationQueue.Payload {
    /// The `payload` column: `{"clock":…` (one clock for every field) or `{"clocks":…` (per field),
    /// then `"deletion":…,"fields":…}`, as `Payload.read` reads it back. With `fieldsInAudit`,
    /// `"fieldsInAudit":true` stands for the fields, which the row's audit entry holds.
    func encoded(fieldsInAudit: Bool = false) throws -> String {
        var json = CompactJSON()
        if let shared = sharedClock {
            json.raw("{\"clock\":")
            json.string(shared.encoded)
        } else {
            json.raw("{\"clocks\":")
            json.clocks(clocks)
        }
        if let deletion {
            json.raw(",\"deletion\":")
            json.string(deletion.encoded)
        }
        if fieldsInAudit {
            json.raw(",\"fieldsInAudit\":true}")
        } else {
            json.raw(",\"fields\":")
            try json.fields(fields)
            json.raw("}")
        }
        return json.text
    }
}

extension FieldClocks.Stored {
    /// The `clocks` column of `field_clocks` for a record of `entity`.
    func encoded(for entity: EntityType) throws -> String {
        var json = CompactJSON(capacity: 128)
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
                    try json.value(change.previous ?? .null)
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
