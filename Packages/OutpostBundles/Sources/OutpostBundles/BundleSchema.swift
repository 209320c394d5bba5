/// The frozen bundle schemas, compiled into the package so validation never reads files from a checkout
/// (a team may depend on `OutpostBundles` alone), and so a server can serve them as they are.
/// A test checks that each equals its file under `schemas/` byte for byte.
public enum BundleSchema {
    /// `schemas/bundle.xsd`: the XML encoding, which libxml2's validator enforces while streaming.
    public static let xsd = #"""
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
              <xs:element name="opportunity" type="opportunity"/>
              <xs:element name="project" type="project"/>
              <xs:element name="member" type="member"/>
              <xs:element name="scope" type="scope"/>
              <xs:element name="measureSheet" type="measureSheet"/>
              <xs:element name="measure" type="measure"/>
              <xs:element name="scopeItem" type="scopeItem"/>
              <xs:element name="discount" type="discount"/>
              <xs:element name="financeOption" type="financeOption"/>
              <xs:element name="fee" type="fee"/>
              <xs:element name="asset" type="asset"/>
              <xs:element name="referenceDocument" type="referenceDocument"/>
              <xs:element name="issue" type="issue"/>
              <xs:element name="comment" type="comment"/>
              <xs:element name="dailyLog" type="dailyLog"/>
              <xs:element name="timeEntry" type="timeEntry"/>
              <xs:element name="mediaAttachment" type="mediaAttachment"/>
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

  <xs:complexType name="opportunity">
    <xs:sequence>
      <xs:element name="name" type="text"/>
      <xs:element name="customerName" type="text"/>
      <xs:element name="address" type="text"/>
      <xs:element name="stage">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="lead"/>
            <xs:enumeration value="qualified"/>
            <xs:enumeration value="proposal"/>
            <xs:enumeration value="won"/>
            <xs:enumeration value="lost"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="estimatedValueCents" type="count"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="project">
    <xs:sequence>
      <xs:element name="opportunityID" type="uuid" minOccurs="0"/>
      <xs:element name="name" type="text"/>
      <xs:element name="number" type="text" minOccurs="0"/>
      <xs:element name="address" type="text"/>
      <xs:element name="status">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="planned"/>
            <xs:enumeration value="active"/>
            <xs:enumeration value="onHold"/>
            <xs:enumeration value="completed"/>
            <xs:enumeration value="cancelled"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="startDay" type="day" minOccurs="0"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="member">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="userID" type="uuid"/>
      <xs:element name="name" type="text"/>
      <xs:element name="email" type="text"/>
      <xs:element name="role">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="owner"/>
            <xs:enumeration value="projectManager"/>
            <xs:enumeration value="estimator"/>
            <xs:enumeration value="foreman"/>
            <xs:enumeration value="crew"/>
            <xs:enumeration value="viewer"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="scope">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="name" type="text"/>
      <xs:element name="notes" type="text"/>
      <xs:element name="sortOrder" type="count"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="measureSheet">
    <xs:sequence>
      <xs:element name="scopeID" type="uuid"/>
      <xs:element name="name" type="text"/>
      <xs:element name="notes" type="text"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="measure">
    <xs:sequence>
      <xs:element name="measureSheetID" type="uuid"/>
      <xs:element name="label" type="text"/>
      <xs:element name="quantity" type="quantity"/>
      <xs:element name="unit" type="text"/>
      <xs:element name="sortOrder" type="count"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="scopeItem">
    <xs:sequence>
      <xs:element name="scopeID" type="uuid"/>
      <xs:element name="measureID" type="uuid" minOccurs="0"/>
      <xs:element name="name" type="text"/>
      <xs:element name="quantity" type="quantity"/>
      <xs:element name="unit" type="text"/>
      <xs:element name="unitPriceCents" type="count"/>
      <xs:element name="sortOrder" type="count"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="discount">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="name" type="text"/>
      <xs:element name="kind">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="percentage"/>
            <xs:enumeration value="fixedAmount"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="value" type="count"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="financeOption">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="lender" type="text"/>
      <xs:element name="termMonths" type="count"/>
      <xs:element name="aprBasisPoints" type="count"/>
      <xs:element name="downPaymentCents" type="count"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="fee">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="name" type="text"/>
      <xs:element name="amountCents" type="count"/>
      <xs:element name="isTaxable" type="xs:boolean"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="asset">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="name" type="text"/>
      <xs:element name="qrCode" type="text"/>
      <xs:element name="category" type="text"/>
      <xs:element name="location" type="text"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="referenceDocument">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="title" type="text"/>
      <xs:element name="kind">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="drawing"/>
            <xs:enumeration value="rfi"/>
            <xs:enumeration value="designNote"/>
            <xs:enumeration value="specification"/>
            <xs:enumeration value="other"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="revision" type="text"/>
      <xs:element name="fileName" type="text"/>
      <xs:element name="byteSize" type="count"/>
      <xs:element name="sha256" type="sha256"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="issue">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="title" type="text"/>
      <xs:element name="details" type="text"/>
      <xs:element name="status">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="open"/>
            <xs:enumeration value="inProgress"/>
            <xs:enumeration value="resolved"/>
            <xs:enumeration value="closed"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="priority">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="low"/>
            <xs:enumeration value="medium"/>
            <xs:enumeration value="high"/>
            <xs:enumeration value="critical"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="assigneeID" type="uuid" minOccurs="0"/>
      <xs:element name="latitude" type="xs:double" minOccurs="0"/>
      <xs:element name="longitude" type="xs:double" minOccurs="0"/>
      <xs:element name="assetID" type="uuid" minOccurs="0"/>
      <xs:element name="modelElementID" type="text" minOccurs="0"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="comment">
    <xs:sequence>
      <xs:element name="issueID" type="uuid"/>
      <xs:element name="authorID" type="uuid"/>
      <xs:element name="body" type="text"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="dailyLog">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="authorID" type="uuid"/>
      <xs:element name="day" type="day"/>
      <xs:element name="notes" type="text"/>
      <xs:element name="weather" type="text"/>
      <xs:element name="crew" type="text"/>
      <xs:element name="crewSize" type="count"/>
      <xs:element name="hours" type="quantity"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="timeEntry">
    <xs:sequence>
      <xs:element name="projectID" type="uuid"/>
      <xs:element name="memberID" type="uuid"/>
      <xs:element name="kind">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="clockIn"/>
            <xs:enumeration value="clockOut"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="recordedAt" type="timestamp"/>
      <xs:element name="clockInID" type="uuid" minOccurs="0"/>
      <xs:element name="latitude" type="xs:double" minOccurs="0"/>
      <xs:element name="longitude" type="xs:double" minOccurs="0"/>
      <xs:element name="note" type="text"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

  <xs:complexType name="mediaAttachment">
    <xs:sequence>
      <xs:element name="issueID" type="uuid" minOccurs="0"/>
      <xs:element name="dailyLogID" type="uuid" minOccurs="0"/>
      <xs:element name="kind">
        <xs:simpleType>
          <xs:restriction base="xs:string">
            <xs:enumeration value="photo"/>
            <xs:enumeration value="voiceNote"/>
          </xs:restriction>
        </xs:simpleType>
      </xs:element>
      <xs:element name="fileName" type="text"/>
      <xs:element name="contentType" type="text"/>
      <xs:element name="byteSize" type="count"/>
      <xs:element name="sha256" type="sha256"/>
      <xs:element name="thumbnail" type="xs:base64Binary" minOccurs="0"/>
      <xs:element name="capturedAt" type="timestamp"/>
      <xs:element name="durationSeconds" type="quantity" minOccurs="0"/>
    </xs:sequence>
    <xs:attributeGroup ref="sync"/>
  </xs:complexType>

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

    /// `schemas/bundle.schema.json`: the JSON encoding (JSON Schema 2020-12), enforced by the JSON reader.
    public static let jsonSchema = #"""
{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "urn:outpost:bundle:1",
  "title": "Outpost pre-sync bundle, JSON encoding, format versions 1 and 2",
  "description": "One project's records as the server sees them, and the files a zip container ships. Frozen: a change is a new format version; version 2 adds the optional checkpoints (the points of the server's history the records were read at, which an importing device asks the server to confirm), and a version 1 document is valid as it was. A null field may be null or absent. Instants are ISO 8601 UTC with milliseconds, ids UUIDs, blobs base64. Semantic rules (required text not blank, clock-out pairing...) are the entity catalog's and are checked after this schema.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "format",
    "formatVersion",
    "projectID",
    "records"
  ],
  "properties": {
    "format": {
      "const": "outpost-bundle"
    },
    "formatVersion": {
      "type": "integer",
      "minimum": 1
    },
    "projectID": {
      "$ref": "#/$defs/uuid"
    },
    "asOf": {
      "anyOf": [
        {
          "$ref": "#/$defs/timestamp"
        },
        {
          "type": "null"
        }
      ]
    },
    "checkpoints": {
      "type": "array",
      "minItems": 1,
      "maxItems": 64,
      "items": {
        "$ref": "#/$defs/checkpoint"
      }
    },
    "files": {
      "type": "array",
      "items": {
        "$ref": "#/$defs/file"
      }
    },
    "records": {
      "type": "array",
      "items": {
        "oneOf": [
          {
            "$ref": "#/$defs/opportunity"
          },
          {
            "$ref": "#/$defs/project"
          },
          {
            "$ref": "#/$defs/member"
          },
          {
            "$ref": "#/$defs/scope"
          },
          {
            "$ref": "#/$defs/measureSheet"
          },
          {
            "$ref": "#/$defs/measure"
          },
          {
            "$ref": "#/$defs/scopeItem"
          },
          {
            "$ref": "#/$defs/discount"
          },
          {
            "$ref": "#/$defs/financeOption"
          },
          {
            "$ref": "#/$defs/fee"
          },
          {
            "$ref": "#/$defs/asset"
          },
          {
            "$ref": "#/$defs/referenceDocument"
          },
          {
            "$ref": "#/$defs/issue"
          },
          {
            "$ref": "#/$defs/comment"
          },
          {
            "$ref": "#/$defs/dailyLog"
          },
          {
            "$ref": "#/$defs/timeEntry"
          },
          {
            "$ref": "#/$defs/mediaAttachment"
          }
        ]
      }
    }
  },
  "$defs": {
    "uuid": {
      "type": "string",
      "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    },
    "checkpoint": {
      "type": "string",
      "pattern": "^[1-9][0-9]{0,18}\\.[0-9a-f]{16}$"
    },
    "timestamp": {
      "type": "string",
      "format": "date-time",
      "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$"
    },
    "day": {
      "type": "string",
      "format": "date",
      "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    },
    "sha256": {
      "type": "string",
      "pattern": "^[0-9a-f]{64}$"
    },
    "text": {
      "type": "string",
      "maxLength": 1048576
    },
    "count": {
      "type": "integer",
      "minimum": 0,
      "maximum": 9223372036854775807
    },
    "file": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "name",
        "byteSize",
        "sha256"
      ],
      "properties": {
        "name": {
          "type": "string",
          "minLength": 1,
          "maxLength": 1024
        },
        "byteSize": {
          "$ref": "#/$defs/count"
        },
        "sha256": {
          "$ref": "#/$defs/sha256"
        }
      }
    },
    "opportunity": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "opportunity"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "name",
            "customerName",
            "address",
            "stage",
            "estimatedValueCents"
          ],
          "properties": {
            "name": {
              "$ref": "#/$defs/text"
            },
            "customerName": {
              "$ref": "#/$defs/text"
            },
            "address": {
              "$ref": "#/$defs/text"
            },
            "stage": {
              "enum": [
                "lead",
                "qualified",
                "proposal",
                "won",
                "lost"
              ]
            },
            "estimatedValueCents": {
              "$ref": "#/$defs/count"
            }
          }
        }
      }
    },
    "project": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "project"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "name",
            "address",
            "status"
          ],
          "properties": {
            "opportunityID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "number": {
              "anyOf": [
                {
                  "$ref": "#/$defs/text"
                },
                {
                  "type": "null"
                }
              ]
            },
            "address": {
              "$ref": "#/$defs/text"
            },
            "status": {
              "enum": [
                "planned",
                "active",
                "onHold",
                "completed",
                "cancelled"
              ]
            },
            "startDay": {
              "anyOf": [
                {
                  "$ref": "#/$defs/day"
                },
                {
                  "type": "null"
                }
              ]
            }
          }
        }
      }
    },
    "member": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "member"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "userID",
            "name",
            "email",
            "role"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "userID": {
              "$ref": "#/$defs/uuid"
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "email": {
              "$ref": "#/$defs/text"
            },
            "role": {
              "enum": [
                "owner",
                "projectManager",
                "estimator",
                "foreman",
                "crew",
                "viewer"
              ]
            }
          }
        }
      }
    },
    "scope": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "scope"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "name",
            "notes",
            "sortOrder"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "notes": {
              "$ref": "#/$defs/text"
            },
            "sortOrder": {
              "$ref": "#/$defs/count"
            }
          }
        }
      }
    },
    "measureSheet": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "measureSheet"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "scopeID",
            "name",
            "notes"
          ],
          "properties": {
            "scopeID": {
              "$ref": "#/$defs/uuid"
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "notes": {
              "$ref": "#/$defs/text"
            }
          }
        }
      }
    },
    "measure": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "measure"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "measureSheetID",
            "label",
            "quantity",
            "unit",
            "sortOrder"
          ],
          "properties": {
            "measureSheetID": {
              "$ref": "#/$defs/uuid"
            },
            "label": {
              "$ref": "#/$defs/text"
            },
            "quantity": {
              "type": "number",
              "minimum": 0
            },
            "unit": {
              "$ref": "#/$defs/text"
            },
            "sortOrder": {
              "$ref": "#/$defs/count"
            }
          }
        }
      }
    },
    "scopeItem": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "scopeItem"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "scopeID",
            "name",
            "quantity",
            "unit",
            "unitPriceCents",
            "sortOrder"
          ],
          "properties": {
            "scopeID": {
              "$ref": "#/$defs/uuid"
            },
            "measureID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "quantity": {
              "type": "number",
              "minimum": 0
            },
            "unit": {
              "$ref": "#/$defs/text"
            },
            "unitPriceCents": {
              "$ref": "#/$defs/count"
            },
            "sortOrder": {
              "$ref": "#/$defs/count"
            }
          }
        }
      }
    },
    "discount": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "discount"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "name",
            "kind",
            "value"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "kind": {
              "enum": [
                "percentage",
                "fixedAmount"
              ]
            },
            "value": {
              "$ref": "#/$defs/count"
            }
          }
        }
      }
    },
    "financeOption": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "financeOption"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "lender",
            "termMonths",
            "aprBasisPoints",
            "downPaymentCents"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "lender": {
              "$ref": "#/$defs/text"
            },
            "termMonths": {
              "$ref": "#/$defs/count"
            },
            "aprBasisPoints": {
              "$ref": "#/$defs/count"
            },
            "downPaymentCents": {
              "$ref": "#/$defs/count"
            }
          }
        }
      }
    },
    "fee": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "fee"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "name",
            "amountCents",
            "isTaxable"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "amountCents": {
              "$ref": "#/$defs/count"
            },
            "isTaxable": {
              "type": "boolean"
            }
          }
        }
      }
    },
    "asset": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "asset"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "name",
            "qrCode",
            "category",
            "location"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "name": {
              "$ref": "#/$defs/text"
            },
            "qrCode": {
              "$ref": "#/$defs/text"
            },
            "category": {
              "$ref": "#/$defs/text"
            },
            "location": {
              "$ref": "#/$defs/text"
            }
          }
        }
      }
    },
    "referenceDocument": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "referenceDocument"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "title",
            "kind",
            "revision",
            "fileName",
            "byteSize",
            "sha256"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "title": {
              "$ref": "#/$defs/text"
            },
            "kind": {
              "enum": [
                "drawing",
                "rfi",
                "designNote",
                "specification",
                "other"
              ]
            },
            "revision": {
              "$ref": "#/$defs/text"
            },
            "fileName": {
              "$ref": "#/$defs/text"
            },
            "byteSize": {
              "$ref": "#/$defs/count"
            },
            "sha256": {
              "$ref": "#/$defs/sha256"
            }
          }
        }
      }
    },
    "issue": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "issue"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "title",
            "details",
            "status",
            "priority"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "title": {
              "$ref": "#/$defs/text"
            },
            "details": {
              "$ref": "#/$defs/text"
            },
            "status": {
              "enum": [
                "open",
                "inProgress",
                "resolved",
                "closed"
              ]
            },
            "priority": {
              "enum": [
                "low",
                "medium",
                "high",
                "critical"
              ]
            },
            "assigneeID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "latitude": {
              "anyOf": [
                {
                  "type": "number"
                },
                {
                  "type": "null"
                }
              ]
            },
            "longitude": {
              "anyOf": [
                {
                  "type": "number"
                },
                {
                  "type": "null"
                }
              ]
            },
            "assetID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "modelElementID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/text"
                },
                {
                  "type": "null"
                }
              ]
            }
          }
        }
      }
    },
    "comment": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "comment"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "issueID",
            "authorID",
            "body"
          ],
          "properties": {
            "issueID": {
              "$ref": "#/$defs/uuid"
            },
            "authorID": {
              "$ref": "#/$defs/uuid"
            },
            "body": {
              "$ref": "#/$defs/text"
            }
          }
        }
      }
    },
    "dailyLog": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "dailyLog"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "authorID",
            "day",
            "notes",
            "weather",
            "crew",
            "crewSize",
            "hours"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "authorID": {
              "$ref": "#/$defs/uuid"
            },
            "day": {
              "$ref": "#/$defs/day"
            },
            "notes": {
              "$ref": "#/$defs/text"
            },
            "weather": {
              "$ref": "#/$defs/text"
            },
            "crew": {
              "$ref": "#/$defs/text"
            },
            "crewSize": {
              "$ref": "#/$defs/count"
            },
            "hours": {
              "type": "number",
              "minimum": 0
            }
          }
        }
      }
    },
    "timeEntry": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "timeEntry"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "projectID",
            "memberID",
            "kind",
            "recordedAt",
            "note"
          ],
          "properties": {
            "projectID": {
              "$ref": "#/$defs/uuid"
            },
            "memberID": {
              "$ref": "#/$defs/uuid"
            },
            "kind": {
              "enum": [
                "clockIn",
                "clockOut"
              ]
            },
            "recordedAt": {
              "$ref": "#/$defs/timestamp"
            },
            "clockInID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "latitude": {
              "anyOf": [
                {
                  "type": "number"
                },
                {
                  "type": "null"
                }
              ]
            },
            "longitude": {
              "anyOf": [
                {
                  "type": "number"
                },
                {
                  "type": "null"
                }
              ]
            },
            "note": {
              "$ref": "#/$defs/text"
            }
          }
        }
      }
    },
    "mediaAttachment": {
      "type": "object",
      "additionalProperties": false,
      "required": [
        "entity",
        "id",
        "version",
        "createdAt",
        "updatedAt",
        "fields"
      ],
      "properties": {
        "entity": {
          "const": "mediaAttachment"
        },
        "id": {
          "$ref": "#/$defs/uuid"
        },
        "serverID": {
          "anyOf": [
            {
              "$ref": "#/$defs/text"
            },
            {
              "type": "null"
            }
          ]
        },
        "version": {
          "$ref": "#/$defs/count"
        },
        "createdAt": {
          "$ref": "#/$defs/timestamp"
        },
        "updatedAt": {
          "$ref": "#/$defs/timestamp"
        },
        "deletedAt": {
          "anyOf": [
            {
              "$ref": "#/$defs/timestamp"
            },
            {
              "type": "null"
            }
          ]
        },
        "fields": {
          "type": "object",
          "additionalProperties": false,
          "required": [
            "kind",
            "fileName",
            "contentType",
            "byteSize",
            "sha256",
            "capturedAt"
          ],
          "properties": {
            "issueID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "dailyLogID": {
              "anyOf": [
                {
                  "$ref": "#/$defs/uuid"
                },
                {
                  "type": "null"
                }
              ]
            },
            "kind": {
              "enum": [
                "photo",
                "voiceNote"
              ]
            },
            "fileName": {
              "$ref": "#/$defs/text"
            },
            "contentType": {
              "$ref": "#/$defs/text"
            },
            "byteSize": {
              "$ref": "#/$defs/count"
            },
            "sha256": {
              "$ref": "#/$defs/sha256"
            },
            "thumbnail": {
              "anyOf": [
                {
                  "type": "string",
                  "contentEncoding": "base64"
                },
                {
                  "type": "null"
                }
              ]
            },
            "capturedAt": {
              "$ref": "#/$defs/timestamp"
            },
            "durationSeconds": {
              "anyOf": [
                {
                  "type": "number",
                  "minimum": 0
                },
                {
                  "type": "null"
                }
              ]
            }
          }
        }
      }
    }
  }
}

"""#
}
