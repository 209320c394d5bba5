import Foundation
import OutpostSchema

/// Writes one encoding of a bundle, record by record, in the exact form the schemas define.
protocol BundleWriter {
    func begin(_ header: BundleHeader) throws(BundleError)
    func write(_ record: EntityRecord) throws(BundleError)
    func end() throws(BundleError)
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
        let sync = record.sync
        var text = "    <\(record.entity.rawValue) id=\"\(record.id.lowercasedText)\""
        if let serverID = sync.serverID { text += " serverID=\"\(try Self.escape(serverID, attribute: true, record))\"" }
        text += " version=\"\(sync.version)\" createdAt=\"\(Timestamp.string(from: sync.createdAt))\""
        text += " updatedAt=\"\(Timestamp.string(from: sync.updatedAt))\""
        if let deletedAt = sync.deletedAt { text += " deletedAt=\"\(Timestamp.string(from: deletedAt))\"" }
        text += ">\n"
        for field in record.entity.description.fields {
            let value = record[field.name]
            if value.isNull { continue }
            let body = try Self.escape(FieldText.text(of: value), attribute: false, record, field: field.name)
            text += body.isEmpty ? "      <\(field.name)/>\n" : "      <\(field.name)>\(body)</\(field.name)>\n"
        }
        text += "    </\(record.entity.rawValue)>\n"
        try output.write(text)
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
        try output.write(text + "  \"records\": [")
    }

    func write(_ record: EntityRecord) throws(BundleError) {
        let sync = record.sync
        var text = first ? "\n" : ",\n"
        first = false
        text += "    {\"entity\": \"\(record.entity.rawValue)\", \"id\": \"\(record.id.lowercasedText)\""
        if let serverID = sync.serverID { text += ", \"serverID\": \(Self.quote(serverID))" }
        text += ", \"version\": \(sync.version), \"createdAt\": \"\(Timestamp.string(from: sync.createdAt))\""
        text += ", \"updatedAt\": \"\(Timestamp.string(from: sync.updatedAt))\""
        if let deletedAt = sync.deletedAt { text += ", \"deletedAt\": \"\(Timestamp.string(from: deletedAt))\"" }
        text += ", \"fields\": {"
        var separator = ""
        for field in record.entity.description.fields {
            let value = record[field.name]
            if value.isNull { continue }
            text += separator + "\"\(field.name)\": " + Self.json(value)
            separator = ", "
        }
        try output.write(text + "}}")
    }

    func end() throws(BundleError) {
        try output.write(first ? "]\n}\n" : "\n  ]\n}\n")
    }

    private static func json(_ value: FieldValue) -> String {
        switch value {
        case .null: "null"
        case .bool(let flag): flag ? "true" : "false"
        case .integer(let number): String(number)
        case .real(let number): number.description
        default: quote(FieldText.text(of: value))
        }
    }

    static func quote(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\r": quoted += "\\r"
            case "\t": quoted += "\\t"
            case "\u{0}"..."\u{1F}": quoted += String(format: "\\u%04x", scalar.value)
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}
