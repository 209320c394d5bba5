import Foundation
import OutpostSchema

/// The bundle schemas of an app's schema (`AppSchema`), generated from its entities: the XSD libxml2's
/// validator enforces while streaming, and the JSON Schema (2020-12) the JSON reader's checks follow.
/// `schemas/bundle.xsd` and `schemas/bundle.schema.json` are the field-service schema's output, which a
/// test holds byte for byte (`outpost schema xsd`, `outpost schema json-schema` print them).
///
/// Only the entities change from one schema to another: the header, the sync metadata and the
/// shared simple types are the format's, written here once.
public enum BundleSchema {
    /// The field-service schema's XSD (`schemas/bundle.xsd`).
    public static let xsd = xsd(for: EntityCatalog.schema)

    /// The field-service schema's JSON Schema (`schemas/bundle.schema.json`).
    public static let jsonSchema = jsonSchema(for: EntityCatalog.schema)

    /// The XSD of `schema`'s bundles: an element per entity in the records' choice, a complex type per
    /// entity (its fields as elements in declaration order, optional ones `minOccurs="0"`, choices as
    /// enumerations), the sync metadata as attributes.
    public static func xsd(for schema: AppSchema) -> String {
        var text = XSDFrame.prefix
        for description in schema.entities {
            text += "              <xs:element name=\"\(description.type.rawValue)\" type=\"\(description.type.rawValue)\"/>\n"
        }
        text += XSDFrame.middle
        for description in schema.entities {
            text += "  <xs:complexType name=\"\(description.type.rawValue)\">\n    <xs:sequence>\n"
            for field in description.fields {
                let occurs = field.isOptional ? " minOccurs=\"0\"" : ""
                if case .choice(let values) = field.kind {
                    text += "      <xs:element name=\"\(field.name)\"\(occurs)>\n        <xs:simpleType>\n"
                    text += "          <xs:restriction base=\"xs:string\">\n"
                    for value in values { text += "            <xs:enumeration value=\"\(value)\"/>\n" }
                    text += "          </xs:restriction>\n        </xs:simpleType>\n      </xs:element>\n"
                } else {
                    text += "      <xs:element name=\"\(field.name)\" type=\"\(xsdType(of: field.kind))\"\(occurs)/>\n"
                }
            }
            text += "    </xs:sequence>\n    <xs:attributeGroup ref=\"sync\"/>\n  </xs:complexType>\n\n"
        }
        return text + XSDFrame.suffix
    }

    private static func xsdType(of kind: FieldKind) -> String {
        switch kind {
        case .text: "text"
        case .integer: "xs:long"
        case .real: "xs:double"
        case .bool: "xs:boolean"
        case .date: "timestamp"
        case .uuid: "uuid"
        case .blob: "xs:base64Binary"
        case .money, .count: "count"
        case .quantity: "quantity"
        case .day: "day"
        case .sha256: "sha256"
        case .choice: "xs:string"  // written as an enumeration instead
        }
    }

    /// The JSON Schema of `schema`'s bundles: a definition per entity (`entity` its name, the sync
    /// metadata, `fields` with each non-optional field required and optional ones also null).
    public static func jsonSchema(for schema: AppSchema) -> String {
        var definitions = JSONFrame.sharedDefinitions
        for description in schema.entities {
            var properties: [(String, OrderedJSON)] = []
            for field in description.fields {
                let value = jsonType(of: field.kind)
                properties.append((field.name, field.isOptional ? .object([("anyOf", .array([value, .object([("type", .string("null"))])]))]) : value))
            }
            definitions.append((description.type.rawValue, .object([
                ("type", .string("object")),
                ("additionalProperties", .bool(false)),
                ("required", .array(["entity", "id", "version", "createdAt", "updatedAt", "fields"].map(OrderedJSON.string))),
                ("properties", .object([("entity", .object([("const", .string(description.type.rawValue))]))] + JSONFrame.syncProperties + [
                    ("fields", .object([
                        ("type", .string("object")),
                        ("additionalProperties", .bool(false)),
                        ("required", .array(description.fields.filter { !$0.isOptional }.map { .string($0.name) })),
                        ("properties", .object(properties)),
                    ])),
                ])),
            ])))
        }
        let records: OrderedJSON = .object([
            ("type", .string("array")),
            ("items", .object([("oneOf", .array(schema.entities.map { .object([("$ref", .string("#/$defs/\($0.type.rawValue)"))]) }))])),
        ])
        let document = OrderedJSON.object(JSONFrame.head + [
            ("properties", .object(JSONFrame.headerProperties + [("records", records)])),
            ("$defs", .object(definitions)),
        ])
        return document.text(indent: 0) + "\n"
    }

    private static func jsonType(of kind: FieldKind) -> OrderedJSON {
        func reference(_ name: String) -> OrderedJSON { .object([("$ref", .string("#/$defs/\(name)"))]) }
        switch kind {
        case .text: return reference("text")
        case .integer: return .object([("type", .string("integer"))])
        case .real: return .object([("type", .string("number"))])
        case .bool: return .object([("type", .string("boolean"))])
        case .date: return reference("timestamp")
        case .uuid: return reference("uuid")
        case .blob: return .object([("type", .string("string")), ("contentEncoding", .string("base64"))])
        case .money, .count: return reference("count")
        case .quantity: return .object([("type", .string("number")), ("minimum", .integer(0))])
        case .day: return reference("day")
        case .sha256: return reference("sha256")
        case .choice(let values): return .object([("enum", .array(values.map(OrderedJSON.string)))])
        }
    }
}

/// The format's fixed XSD text around the generated entity parts.
private enum XSDFrame {
    static let prefix = #"""
<?xml version="1.0" encoding="UTF-8"?>
<!-- Outpost pre-sync bundle, XML encoding, format versions 1 and 2. Frozen: a change is a new format version;
     version 2 adds the optional checkpoints attribute, and a version 1 document is valid as it was.
     One <bundle> holds the files the bundle ships (zip containers only) and the records of one project;
     each record is an element named after its entity, sync metadata as attributes, domain fields as child
     elements in catalog order. A null field is an absent element. Instants are ISO 8601 UTC with milliseconds,
     ids lowercase UUIDs, blobs base64. Semantic rules (required text not blank, clock-out pairing...) are the
     entity catalog's and are checked after this schema. -->
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="unqualified">

  <xs:element name="bundle">
    <xs:complexType>
      <xs:sequence>
        <xs:element name="files" minOccurs="0">
          <xs:complexType>
            <xs:sequence>
              <xs:element name="file" minOccurs="0" maxOccurs="unbounded">
                <xs:complexType>
                  <xs:attribute name="name" type="filePath" use="required"/>
                  <xs:attribute name="byteSize" type="count" use="required"/>
                  <xs:attribute name="sha256" type="sha256" use="required"/>
                </xs:complexType>
              </xs:element>
            </xs:sequence>
          </xs:complexType>
        </xs:element>
        <xs:element name="records">
          <xs:complexType>
            <xs:choice minOccurs="0" maxOccurs="unbounded">
"""# + "\n"

    static let middle = #"""
            </xs:choice>
          </xs:complexType>
        </xs:element>
      </xs:sequence>
      <xs:attribute name="formatVersion" type="xs:positiveInteger" use="required"/>
      <xs:attribute name="projectID" type="uuid" use="required"/>
      <xs:attribute name="asOf" type="timestamp"/>
      <!-- Version 2: the points of the server's history the records were read at (a server bundle's
           snapshot; an exporting device's own and those its unconfirmed imports carried). An importing
           device asks the server to confirm each at its next sync, so records of a history a restore
           lost are noticed and removed. -->
      <xs:attribute name="checkpoints" type="checkpoints"/>
    </xs:complexType>
  </xs:element>

  <!-- The sync metadata every record carries: the server's view of it. -->
  <xs:attributeGroup name="sync">
    <xs:attribute name="id" type="uuid" use="required"/>
    <xs:attribute name="serverID" type="text"/>
    <xs:attribute name="version" type="count" use="required"/>
    <xs:attribute name="createdAt" type="timestamp" use="required"/>
    <xs:attribute name="updatedAt" type="timestamp" use="required"/>
    <xs:attribute name="deletedAt" type="timestamp"/>
  </xs:attributeGroup>

"""# + "\n"

    static let suffix = #"""
  <xs:simpleType name="uuid">
    <xs:restriction base="xs:string"><xs:pattern value="[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="timestamp">
    <xs:restriction base="xs:string"><xs:pattern value="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="day">
    <xs:restriction base="xs:string"><xs:pattern value="[0-9]{4}-[0-9]{2}-[0-9]{2}"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="sha256">
    <xs:restriction base="xs:string"><xs:pattern value="[0-9a-f]{64}"/></xs:restriction>
  </xs:simpleType>
  <!-- At most 1 MiB of UTF-8 (what every write and server holds a text to): maxLength counts characters,
       so it bounds the bytes only from above, and an importer refuses a longer text by its bytes. -->
  <xs:simpleType name="text">
    <xs:restriction base="xs:string"><xs:maxLength value="1048576"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="filePath">
    <xs:restriction base="xs:string"><xs:minLength value="1"/><xs:maxLength value="1024"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="checkpoint">
    <xs:restriction base="xs:string"><xs:pattern value="[1-9][0-9]{0,18}\.[0-9a-f]{16}"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="checkpoints">
    <xs:restriction>
      <xs:simpleType><xs:list itemType="checkpoint"/></xs:simpleType>
      <xs:minLength value="1"/><xs:maxLength value="64"/>
    </xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="count">
    <xs:restriction base="xs:long"><xs:minInclusive value="0"/></xs:restriction>
  </xs:simpleType>
  <xs:simpleType name="quantity">
    <xs:restriction base="xs:double"><xs:minInclusive value="0"/></xs:restriction>
  </xs:simpleType>
</xs:schema>

"""#
}

/// The format's fixed JSON Schema parts around the generated entity definitions.
private enum JSONFrame {
    static let head: [(String, OrderedJSON)] = [
        ("$schema", .string("https://json-schema.org/draft/2020-12/schema")),
        ("$id", .string("urn:outpost:bundle:1")),
        ("title", .string("Outpost pre-sync bundle, JSON encoding, format versions 1 and 2")),
        ("description", .string("One project's records as the server sees them, and the files a zip container ships. Frozen: a change is a new format version; version 2 adds the optional checkpoints (the points of the server's history the records were read at, which an importing device asks the server to confirm), and a version 1 document is valid as it was. A null field may be null or absent. Instants are ISO 8601 UTC with milliseconds, ids UUIDs, blobs base64. Semantic rules (required text not blank, clock-out pairing...) are the entity catalog's and are checked after this schema.")),
        ("type", .string("object")),
        ("additionalProperties", .bool(false)),
        ("required", .array([.string("format"), .string("formatVersion"), .string("projectID"), .string("records")])),
    ]

    /// The header's properties, before `records`.
    static let headerProperties: [(String, OrderedJSON)] = [
        ("format", .object([
            ("const", .string("outpost-bundle")),
        ])),
        ("formatVersion", .object([
            ("type", .string("integer")),
            ("minimum", .integer(1)),
        ])),
        ("projectID", .object([
            ("$ref", .string("#/$defs/uuid")),
        ])),
        ("asOf", .object([
            ("anyOf", .array([
                .object([
                    ("$ref", .string("#/$defs/timestamp")),
                ]),
                .object([
                    ("type", .string("null")),
                ]),
            ])),
        ])),
        ("checkpoints", .object([
            ("type", .string("array")),
            ("minItems", .integer(1)),
            ("maxItems", .integer(64)),
            ("items", .object([
                ("$ref", .string("#/$defs/checkpoint")),
            ])),
        ])),
        ("files", .object([
            ("type", .string("array")),
            ("items", .object([
                ("$ref", .string("#/$defs/file")),
            ])),
        ])),
    ]

    /// Definitions every schema's bundles use, before the entities'.
    static let sharedDefinitions: [(String, OrderedJSON)] = [
        ("uuid", .object([
            ("type", .string("string")),
            ("pattern", .string("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
        ])),
        ("checkpoint", .object([
            ("type", .string("string")),
            ("pattern", .string(#"^[1-9][0-9]{0,18}\.[0-9a-f]{16}$"#)),
        ])),
        ("timestamp", .object([
            ("type", .string("string")),
            ("format", .string("date-time")),
            ("pattern", .string(#"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$"#)),
        ])),
        ("day", .object([
            ("type", .string("string")),
            ("format", .string("date")),
            ("pattern", .string("^[0-9]{4}-[0-9]{2}-[0-9]{2}$")),
        ])),
        ("sha256", .object([
            ("type", .string("string")),
            ("pattern", .string("^[0-9a-f]{64}$")),
        ])),
        ("text", .object([
            ("$comment", .string("At most 1 MiB of UTF-8 (what every write and server holds a text to): maxLength counts characters, so it bounds the bytes only from above, and an importer refuses a longer text by its bytes.")),
            ("type", .string("string")),
            ("maxLength", .integer(1048576)),
        ])),
        ("count", .object([
            ("type", .string("integer")),
            ("minimum", .integer(0)),
            ("maximum", .integer(9223372036854775807)),
        ])),
        ("file", .object([
            ("type", .string("object")),
            ("additionalProperties", .bool(false)),
            ("required", .array([.string("name"), .string("byteSize"), .string("sha256")])),
            ("properties", .object([
                ("name", .object([
                    ("type", .string("string")),
                    ("minLength", .integer(1)),
                    ("maxLength", .integer(1024)),
                ])),
                ("byteSize", .object([
                    ("$ref", .string("#/$defs/count")),
                ])),
                ("sha256", .object([
                    ("$ref", .string("#/$defs/sha256")),
                ])),
            ])),
        ])),
    ]

    /// A record's sync metadata, after its `entity`.
    static let syncProperties: [(String, OrderedJSON)] = [
        ("id", .object([
            ("$ref", .string("#/$defs/uuid")),
        ])),
        ("serverID", .object([
            ("anyOf", .array([
                .object([
                    ("$ref", .string("#/$defs/text")),
                ]),
                .object([
                    ("type", .string("null")),
                ]),
            ])),
        ])),
        ("version", .object([
            ("$ref", .string("#/$defs/count")),
        ])),
        ("createdAt", .object([
            ("$ref", .string("#/$defs/timestamp")),
        ])),
        ("updatedAt", .object([
            ("$ref", .string("#/$defs/timestamp")),
        ])),
        ("deletedAt", .object([
            ("anyOf", .array([
                .object([
                    ("$ref", .string("#/$defs/timestamp")),
                ]),
                .object([
                    ("type", .string("null")),
                ]),
            ])),
        ])),
    ]
}

/// A JSON value whose objects keep their keys' order, written as Python's `json.dumps(indent=2)`
/// writes (the frozen file's form). Foundation's `JSONSerialization` sorts or scrambles keys and spaces
/// its colons otherwise, so the generated text could not be held byte for byte to the file.
indirect enum OrderedJSON: Sendable {
    case object([(String, OrderedJSON)])
    case array([OrderedJSON])
    case string(String)
    case integer(Int64)
    case bool(Bool)

    func text(indent: Int) -> String {
        let inner = String(repeating: " ", count: indent + 2), outer = String(repeating: " ", count: indent)
        switch self {
        case .object(let members):
            if members.isEmpty { return "{}" }
            return "{\n" + members.map { inner + Self.quote($0.0) + ": " + $0.1.text(indent: indent + 2) }.joined(separator: ",\n")
                + "\n" + outer + "}"
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.text(indent: indent + 2) }.joined(separator: ",\n") + "\n" + outer + "]"
        case .string(let value): return Self.quote(value)
        case .integer(let value): return String(value)
        case .bool(let value): return value ? "true" : "false"
        }
    }

    /// As `json.dumps` quotes: `"` and `\` escaped, control and non-ASCII characters as `\uXXXX`.
    private static func quote(_ text: String) -> String {
        var quoted = "\""
        for unit in text.utf16 {
            switch unit {
            case 0x22: quoted += "\\\""
            case 0x5C: quoted += "\\\\"
            case 0x0A: quoted += "\\n"
            case 0x20..<0x7F: quoted += String(UnicodeScalar(UInt8(unit)))
            default: quoted += String(format: "\\u%04x", unit)
            }
        }
        return quoted + "\""
    }
}
