import Foundation
import OutpostSchema

/// Writes one encoding of a bundle, record by record, in the exact form the schemas define.
protocol BundleWriter {
    func begin(_ header: BundleHeader) throws(BundleError)
    func write(_ record: EntityRecord) throws(BundleError)
    /// `write(_:)` for a record whose fields are still the wire's JSON text, `{"name":{"kind":value},…}`,
    /// as a server stores them (`record.fields` is not read): the same bytes `write(_:)` gives the
    /// decoded record. Stored fields that do not read throw `invalidRecord`, naming the record, with the
    /// reader's error as the cause.
    func write(_ record: EntityRecord, wireFields: String) throws(BundleError)
    func end() throws(BundleError)
}

extension BundleWriter {
    /// Decodes the stored fields, then writes the record: for an encoding that reads every value
    /// anyway (XML escapes each one).
    func write(_ record: EntityRecord, wireFields: String) throws(BundleError) {
        var decoded = record
        do {
            decoded.fields = try JSONReader.wholeFields(of: wireFields)
        } catch {
            throw Self.unreadable(wireFields: record, error)
        }
        try write(decoded)
    }

    /// The error of a record whose stored fields do not read.
    static func unreadable(wireFields record: EntityRecord, _ error: JSONReaderError) -> BundleError {
        BundleError(
            .invalidRecord, message: "the stored fields of \(record.entity.rawValue) \(record.id.lowercasedText) do not read: \(error)",
            entity: record.entity, id: record.id, underlying: error)
    }
}

/// The XML encoding: sync metadata as attributes, one element per non-null field in catalog order.
final class XMLBundleWriter: BundleWriter {
    private let output: OutputFile

    init(output: OutputFile) { self.output = output }

    func begin(_ header: BundleHeader) throws(BundleError) {
        var root = "<bundle formatVersion=\"\(header.formatVersion)\" projectID=\"\(header.projectID.uuidString.lowercased())\""
        if let asOf = header.asOf { root += " asOf=\"\(Timestamp.string(from: asOf))\"" }
        if !header.checkpoints.isEmpty { root += " checkpoints=\"\(header.checkpoints.joined(separator: " "))\"" }
        var text = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\(root)>\n"
        if !header.files.isEmpty {
            text += "  <files>\n"
            for file in header.files {
                text += "    <file name=\"\(try Self.escape(file.name, attribute: true, fileName: file.name))\" byteSize=\"\(file.byteSize)\" sha256=\"\(file.sha256)\"/>\n"
            }
            text += "  </files>\n"
        }
        try output.write(text + "  <records>\n")
    }

    func write(_ record: EntityRecord) throws(BundleError) {
        // Piece by piece into the output's bytes, as the JSON writer does: one String grown per record
        // cost more than the escaping.
        let sync = record.sync
        let element = record.entity.rawValue
        output.append("    <")
        output.append(element)
        output.append(" id=\"")
        output.append(record.id.lowercasedText)
        output.append("\"")
        if let serverID = sync.serverID {
            output.append(" serverID=\"")
            output.append(try Self.escape(serverID, attribute: true, record))
            output.append("\"")
        }
        output.append(" version=\"")
        output.append(String(sync.version))
        output.append("\" createdAt=\"")
        output.append(Timestamp.string(from: sync.createdAt))
        output.append("\" updatedAt=\"")
        output.append(Timestamp.string(from: sync.updatedAt))
        output.append("\"")
        if let deletedAt = sync.deletedAt {
            output.append(" deletedAt=\"")
            output.append(Timestamp.string(from: deletedAt))
            output.append("\"")
        }
        output.append(">\n")
        for field in record.entity.description.fields {
            let value = record[field.name]
            if value.isNull { continue }
            let body = try Self.escape(FieldText.text(of: value), attribute: false, record, field: field.name)
            output.append("      <")
            output.append(field.name)
            if body.isEmpty {
                output.append("/>\n")
            } else {
                output.append(">")
                output.append(body)
                output.append("</")
                output.append(field.name)
                output.append(">\n")
            }
        }
        output.append("    </")
        output.append(element)
        output.append(">\n")
        try output.flushIfFull()
    }

    func end() throws(BundleError) {
        try output.write("  </records>\n</bundle>\n")
    }

    /// Escapes markup, and writes carriage returns (and in attributes, tabs and line feeds) as character
    /// references so a parser's line-end and attribute normalization gives back the same text. Other
    /// control characters have no XML 1.0 form at all.
    static func escape(_ text: String, attribute: Bool, _ record: EntityRecord, field: String? = nil) throws(BundleError) -> String {
        try escape(text, attribute: attribute) { scalar in
            BundleError(.notRepresentable,
                message: "U+\(String(scalar.value, radix: 16, uppercase: true)) cannot be written in XML 1.0; export as JSON",
                entity: record.entity, id: record.id, field: field)
        }
    }

    /// A listed file's name, escaped for an attribute.
    static func escape(_ text: String, attribute: Bool, fileName: String) throws(BundleError) -> String {
        try escape(text, attribute: attribute) { scalar in
            BundleError(.notRepresentable,
                message: "U+\(String(scalar.value, radix: 16, uppercase: true)) cannot be written in XML 1.0; export as JSON",
                archiveEntry: fileName)
        }
    }

    private static func escape(
        _ text: String, attribute: Bool, refusing failure: (Unicode.Scalar) -> BundleError
    ) throws(BundleError) -> String {
        // Most text needs nothing: no markup, no control character, and no 0xEF lead byte (the only
        // one that can start U+FFFE or U+FFFF). Found by a scan of its bytes, it is written as it is;
        // the scalar loop below, for the rest, was the largest part of writing an XML bundle.
        var text = text
        let plain = text.withUTF8 { bytes in
            !bytes.contains { $0 < 0x20 || $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0xEF }
        }
        if plain { return text }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"" where attribute: escaped += "&quot;"
            case "\r": escaped += "&#13;"
            case "\n" where attribute: escaped += "&#10;"
            case "\t" where attribute: escaped += "&#9;"
            case "\t", "\n", "\u{20}"..."\u{D7FF}", "\u{E000}"..."\u{FFFD}", "\u{10000}"..."\u{10FFFF}":
                escaped.unicodeScalars.append(scalar)
            default:
                throw failure(scalar)
            }
        }
        return escaped
    }
}

/// The JSON encoding: one object per record, fields by name with their natural JSON types.
final class JSONBundleWriter: BundleWriter {
    private let output: OutputFile
    private var first = true

    init(output: OutputFile) { self.output = output }

    func begin(_ header: BundleHeader) throws(BundleError) {
        var text = "{\n  \"format\": \"outpost-bundle\",\n  \"formatVersion\": \(header.formatVersion),\n"
        text += "  \"projectID\": \"\(header.projectID.uuidString.lowercased())\",\n"
        if let asOf = header.asOf { text += "  \"asOf\": \"\(Timestamp.string(from: asOf))\",\n" }
        if !header.checkpoints.isEmpty {
            text += "  \"checkpoints\": [" + header.checkpoints.map { "\"\($0)\"" }.joined(separator: ", ") + "],\n"
        }
        if !header.files.isEmpty {
            let listed = header.files.map {
                "    {\"name\": \(Self.quote($0.name)), \"byteSize\": \($0.byteSize), \"sha256\": \"\($0.sha256)\"}"
            }
            text += "  \"files\": [\n" + listed.joined(separator: ",\n") + "\n  ],\n"
        }
        output.append(text + "  \"records\": [")
        try output.flushIfFull()
    }

    func write(_ record: EntityRecord) throws(BundleError) {
        writeHead(of: record)
        var separator = false
        for field in record.entity.description.fields {
            let value = record[field.name]
            if value.isNull { continue }
            writeField(field.name, value, separator: &separator)
        }
        output.append("}}")
        try output.flushIfFull()
    }

    /// The stored text is read in place, with no dictionary of the fields built and looked up again,
    /// and a plain ASCII text value is copied as it stands (it needs no escape). Decoding the stored
    /// fields into a dictionary was three fifths of reading a server's bundle page, and looking them up
    /// again a quarter of writing it (`perf`, a 25,000-record pre-sync).
    func write(_ record: EntityRecord, wireFields: String) throws(BundleError) {
        let fields: [(name: String, value: WireFieldValue)]
        do {
            fields = try Self.read(wireFields)
        } catch {
            throw Self.unreadable(wireFields: record, error)
        }
        writeHead(of: record)
        var separator = false
        for field in record.entity.description.fields {
            // A record has tens of fields: a scan of them costs less than hashing each name.
            guard let found = fields.first(where: { $0.name == field.name }) else { continue }
            switch found.value {
            case .plainText(let bytes):
                output.append(separator ? ", \"" : "\"")
                output.append(field.name)
                output.append("\": \"")
                output.append(bytes)
                output.append("\"")
                separator = true
            case .decoded(let value):
                if value.isNull { continue }
                writeField(field.name, value, separator: &separator)
            }
        }
        output.append("}}")
        try output.flushIfFull()
    }

    /// A stored field's value as `write(_:wireFields:)` read it.
    enum WireFieldValue {
        /// Text of plain ASCII with no character JSON escapes: its bytes, as written between the quotes.
        case plainText(ArraySlice<UInt8>)
        case decoded(FieldValue)
    }

    /// The fields of wire-form JSON in the order they stand, each read as `JSONReader.fields()` reads it
    /// (a repeated name refused as there), but a plain ASCII text kept as its bytes.
    static func read(_ wireFields: String) throws(JSONReaderError) -> [(name: String, value: WireFieldValue)] {
        var reader = JSONReader(bytes: Array(wireFields.utf8))
        var fields: [(name: String, value: WireFieldValue)] = []
        try reader.beginObject()
        while let name = try reader.nextKey() {
            guard !fields.contains(where: { $0.name == name }) else { throw reader.error("the field '\(name)' appears twice") }
            // Past the kind's key only for a text of plain ASCII; anything else is read again from the
            // value's start by `fieldValue()`, with its checks and errors.
            let start = reader
            if !(try reader.takeNull()) {
                try reader.beginObject()
                if try reader.nextKey() == "text", let bytes = try reader.plainASCIIString(), try reader.nextKey() == nil {
                    fields.append((name, .plainText(bytes)))
                    continue
                }
            }
            reader = start
            fields.append((name, .decoded(try reader.fieldValue())))
        }
        try reader.expectEnd()
        return fields
    }

    /// The record's opening, up to the start of its fields' object.
    private func writeHead(of record: EntityRecord) {
        // Straight into the output's bytes: built as a String with values quoted scalar by scalar, this
        // was two thirds of a server's bundle download (`perf`, 30,000 issues), more than reading the rows.
        let sync = record.sync
        output.append(first ? "\n    {\"entity\": \"" : ",\n    {\"entity\": \"")
        first = false
        output.append(record.entity.rawValue)
        output.append("\", \"id\": \"")
        output.append(record.id.lowercasedText)
        output.append("\"")
        if let serverID = sync.serverID {
            output.append(", \"serverID\": ")
            output.appendQuoted(serverID)
        }
        output.append(", \"version\": ")
        output.append(String(sync.version))
        output.append(", \"createdAt\": \"")
        output.append(Timestamp.string(from: sync.createdAt))
        output.append("\", \"updatedAt\": \"")
        output.append(Timestamp.string(from: sync.updatedAt))
        output.append("\"")
        if let deletedAt = sync.deletedAt {
            output.append(", \"deletedAt\": \"")
            output.append(Timestamp.string(from: deletedAt))
            output.append("\"")
        }
        output.append(", \"fields\": {")
    }

    /// One non-null field, after a separator when one came before it.
    private func writeField(_ name: String, _ value: FieldValue, separator: inout Bool) {
        output.append(separator ? ", \"" : "\"")
        output.append(name)
        output.append("\": ")
        switch value {
        case .null: output.append("null")
        case .bool(let flag): output.append(flag ? "true" : "false")
        case .integer(let number): output.append(String(number))
        case .real(let number): output.append(number.description)
        default: output.appendQuoted(FieldText.text(of: value))
        }
        separator = true
    }

    func end() throws(BundleError) {
        output.append(first ? "]\n}\n" : "\n  ]\n}\n")
        try output.flushIfFull()
    }

    /// `text` as a JSON string, escaped as `OutputFile.appendQuoted` escapes it.
    static func quote(_ text: String) -> String {
        let output = OutputFile()
        output.appendQuoted(text)
        return String(decoding: output.take(), as: UTF8.self)
    }
}
