import Clibxml2
import Foundation
import OutpostSchema
import OutpostWire

/// Reads an XML bundle with libxml2's streaming reader (`xmlTextReader`), validating it against the
/// embedded `bundle.xsd` as it goes, so memory stays flat however many records the bundle holds.
///
/// Names are compared as pointers: the reader interns every element and attribute name in its
/// dictionary, and `xmlTextReaderConstString` interns ours there too, so no name becomes a Swift string.
final class XMLBundleReader: BundleItemReader {
    private let input: DocumentInput
    private let limits: BundleLimits
    private let collecting: Bool
    private let location: SourceLocation
    private let reader: xmlTextReaderPtr
    private let sink = XMLErrorSink()
    private var symbols: [UnsafeRawPointer: Symbol] = [:]
    /// Each entity's fields by their interned element name: no Swift string per field element.
    private var fieldSymbols: [EntityType: [UnsafeRawPointer: FieldSlot]] = [:]
    private(set) var collectedErrors: [BundleError] = []

    private var section = Section.outside
    private var record: PartialRecord?
    /// The open record's entry of `fieldSymbols`, looked up once per record rather than once per field.
    private var recordFields: [UnsafeRawPointer: FieldSlot] = [:]
    /// The field element being read; nil between fields and for one the catalog does not have.
    private var openField: FieldSlot?
    private var fieldText = ""
    private var finished = false

    var bytesRead: Int64 { input.bytesRead }

    init(path: String, displayName: String, archiveEntry: String?, limits: BundleLimits, collecting: Bool,
        arrival: BundleArrival? = nil
    ) throws(BundleError) {
        LibXML.prepare()
        let schema = LibXML.schema
        location = SourceLocation(file: displayName, archiveEntry: archiveEntry)
        try XMLProlog.check(path: path, location: location)
        input = try DocumentInput(path: path, limit: limits.maximumDocumentBytes, arrival: arrival)
        self.limits = limits
        self.collecting = collecting
        let context = Unmanaged.passUnretained(input).toOpaque()
        guard let reader = xmlReaderForIO(readDocument, nil, context, displayName, "UTF-8", LibXML.parserOptions) else {
            throw BundleError(.unreadableFile, message: "libxml2 could not start a reader", file: displayName)
        }
        self.reader = reader
        guard xmlTextReaderSetSchema(reader, schema) == 0 else {
            xmlFreeTextReader(reader)
            throw BundleError(.unreadableFile, message: "libxml2 could not attach the bundle schema", file: displayName)
        }
        internSymbols()
    }

    deinit { xmlFreeTextReader(reader) }

    func next() throws(BundleError) -> BundleItem? {
        // libxml2 2.9's per-reader handler (`xmlTextReaderSetStructuredErrorHandler`) reads the wrong
        // user data once the XSD validator is plugged in and crashes on the first error, so errors go
        // through the thread's own structured handler instead, set for exactly the span of this call
        // (the reader is only ever driven synchronously from one call) and restored afterwards.
        let previous = (__xmlStructuredError()?.pointee, __xmlStructuredErrorContext()?.pointee)
        xmlSetStructuredErrorFunc(Unmanaged.passUnretained(sink).toOpaque(), collectXMLError)
        defer { xmlSetStructuredErrorFunc(previous.1, previous.0) }
        while !finished {
            let status = xmlTextReaderRead(reader)
            if status < 0 || input.failed {
                finished = true
                if input.failed { try report(input.failure, fatal: true) }
                try flushErrors(fatal: true)
                try report(error(.malformedXML, "the document ends or breaks here"), fatal: true)
                return nil
            }
            try flushErrors(fatal: false)
            if status == 0 {
                finished = true
                try flushErrors(fatal: true)
                return nil
            }
            if let item = try handleNode() { return item }
        }
        return nil
    }

    // MARK: Nodes

    private func handleNode() throws(BundleError) -> BundleItem? {
        let type = xmlTextReaderNodeType(reader)
        let depth = Int(xmlTextReaderDepth(reader))
        if depth > limits.maximumDepth {
            try report(error(.limitExceeded, "elements nest deeper than \(limits.maximumDepth) levels"), fatal: true)
        }
        switch type {
        case NodeType.element:
            return try startElement(depth: depth)
        case NodeType.text, NodeType.cdata, NodeType.whitespace, NodeType.significantWhitespace:
            if openField != nil, let value = xmlTextReaderConstValue(reader) { try appendText(value) }
            return nil
        case NodeType.endElement:
            return try endElement(depth: depth)
        case NodeType.documentType:
            try report(error(.forbiddenConstruct, "a DOCTYPE (DTD) is not allowed in a bundle"), fatal: true)
            return nil
        case NodeType.entityReference, NodeType.entity:
            try report(error(.forbiddenConstruct, "entity references are not allowed in a bundle"), fatal: true)
            return nil
        default:
            return nil
        }
    }

    private func startElement(depth: Int) throws(BundleError) -> BundleItem? {
        let symbol = currentSymbol()
        let empty = xmlTextReaderIsEmptyElement(reader) == 1
        switch (depth, section, symbol) {
        case (0, _, .bundle):
            section = .bundle
            return try header()
        case (1, _, .files):
            section = .files
        case (1, _, .records):
            section = .records
        case (2, .files, .file):
            return try fileReference()
        case (2, .records, .entity(let entity)):
            record = try startRecord(entity)
            if empty { return try finishRecord() }
        case (3, .records, _):
            guard let shape = record?.shape, let name = xmlTextReaderConstLocalName(reader),
                let field = recordFields[UnsafeRawPointer(name)]
                    ?? shape.description.field(named: String(cString: name)).map({ FieldSlot(name: $0.name, kind: $0.kind) })
            else {
                // The schema reports it; a collecting read keeps going without it.
                openField = nil
                return nil
            }
            openField = field
            fieldText = ""
            if empty { try finishField() }
        default:
            break  // anything else is the schema's to report
        }
        return nil
    }

    private func endElement(depth: Int) throws(BundleError) -> BundleItem? {
        switch (depth, section) {
        case (3, .records):
            if openField != nil { try finishField() }
        case (2, .records):
            return try finishRecord()
        case (1, _):
            section = .bundle
        default:
            break
        }
        return nil
    }

    private func appendText(_ value: UnsafePointer<xmlChar>) throws(BundleError) {
        let text = String(cString: value)
        if fieldText.isEmpty { fieldText = text } else { fieldText += text }
        if fieldText.utf8.count > limits.maximumStringBytes {
            let message = "a value is longer than \(limits.maximumStringBytes) bytes"
            // Named by its record and field when it is one, as every other error about a value is.
            let field = record == nil ? nil : openField
            try report(field.map { recordError(.limitExceeded, message, field: $0.name) } ?? error(.limitExceeded, message), fatal: true)
        }
    }

    private func finishField() throws(BundleError) {
        guard let field = openField, record != nil else { return }
        openField = nil
        // Ids and instants are held to bundle.xsd's patterns here (`LibXML.patternsLeftToTheReader`):
        // their parsers take no text the patterns refuse.
        guard let value = FieldText.value(ofXMLText: fieldText, kind: field.kind) else {
            record?.broken = true
            try report(
                recordError(.schemaViolation, "'\(fieldText.prefix(80))' is not a valid \(field.kind.storageKind)", field: field.name),
                fatal: false)
            return
        }
        record?.fields[field.name] = value
    }

    // MARK: Records, files, header

    private func startRecord(_ entity: EntityType) throws(BundleError) -> PartialRecord {
        guard let shape = RecordShape.all[entity] else { preconditionFailure("no shape for \(entity)") }
        let line = Int(xmlGetLineNo(xmlTextReaderCurrentNode(reader)))
        let partial = PartialRecord(shape: shape, fields: shape.emptyFields, line: line)
        var id: String?, serverID: String?, version: String?, created: String?, updated: String?, deleted: String?
        while xmlTextReaderMoveToNextAttribute(reader) == 1 {
            let value = attributeValue()
            switch currentSymbol() {
            case .id: id = value
            case .serverID: serverID = value
            case .version: version = value
            case .createdAt: created = value
            case .updatedAt: updated = value
            case .deletedAt: deleted = value
            default: break  // the schema reports unknown attributes
            }
        }
        xmlTextReaderMoveToElement(reader)
        recordFields = fieldSymbols[entity] ?? [:]
        partial.id = id.flatMap(UUID.init(hyphenatedText:))
        partial.serverID = serverID
        partial.version = version.flatMap { Int64($0) }
        partial.createdAt = created.flatMap(Timestamp.date(from:))
        partial.updatedAt = updated.flatMap(Timestamp.date(from:))
        partial.deletedAt = deleted.flatMap(Timestamp.date(from:))
        partial.deletedAtIsValid = deleted == nil || partial.deletedAt != nil
        // The id and the instants are held to bundle.xsd's patterns here, not by libxml2
        // (`LibXML.patternsLeftToTheReader`): each text the parsers above did not take is refused.
        func refuse(_ attribute: String, _ text: String?, parsed: Bool, as kind: FieldKind) throws(BundleError) {
            guard let text, !parsed else { return }
            partial.broken = true
            var place = location
            place.line = line
            try report(
                BundleError(.schemaViolation, message: "'\(text.prefix(80))' is not a valid \(kind.storageKind)",
                    entity: entity, id: partial.id, field: attribute).located(place),
                fatal: false)
        }
        try refuse("id", id, parsed: partial.id != nil, as: .uuid)
        try refuse("createdAt", created, parsed: partial.createdAt != nil, as: .date)
        try refuse("updatedAt", updated, parsed: partial.updatedAt != nil, as: .date)
        try refuse("deletedAt", deleted, parsed: partial.deletedAt != nil, as: .date)
        return partial
    }

    private func finishRecord() throws(BundleError) -> BundleItem? {
        guard let partial = record else { return nil }
        record = nil
        // Schema errors about this record arrive with its end tag: report them before handing it on.
        try flushErrors(fatal: false)
        var place = location
        place.line = partial.line
        guard !partial.broken, let id = partial.id, let version = partial.version, let createdAt = partial.createdAt,
            let updatedAt = partial.updatedAt, partial.deletedAtIsValid
        else {
            if !partial.broken && !collecting {
                // Unreachable when the schema holds; kept so a record is never built from half its metadata.
                try report(
                    BundleError(.schemaViolation, message: "the record's id, version or timestamps are missing or malformed",
                        entity: partial.shape.description.type).located(place), fatal: false)
            }
            return nil
        }
        let sync = SyncMetadata(
            serverID: partial.serverID, version: version, createdAt: createdAt, updatedAt: updatedAt,
            deletedAt: partial.deletedAt, syncStatus: .synced, isOrphaned: false)
        let built = EntityRecord(entity: partial.shape.description.type, id: id, fields: partial.fields, sync: sync)
        return .record(built, place)
    }

    private func fileReference() throws(BundleError) -> BundleItem? {
        var place = location
        place.line = Int(xmlGetLineNo(xmlTextReaderCurrentNode(reader)))
        var name: String?, size: Int64?, digest: String?
        while xmlTextReaderMoveToNextAttribute(reader) == 1 {
            let value = attributeValue()
            switch currentSymbol() {
            case .name: name = value
            case .byteSize: size = Int64(value)
            case .sha256: digest = value
            default: break
            }
        }
        xmlTextReaderMoveToElement(reader)
        try flushErrors(fatal: false)
        guard let name, let size, let digest else { return nil }
        return .file(FileReference(name: name, byteSize: size, sha256: digest), place)
    }

    private func header() throws(BundleError) -> BundleItem? {
        var version: Int?, versionText: String?, versionDigits: Substring?, project: UUID?, asOf: Date?, checkpoints: [String] = []
        while xmlTextReaderMoveToNextAttribute(reader) == 1 {
            let value = attributeValue()
            switch currentSymbol() {
            case .formatVersion:
                versionText = value
                versionDigits = Self.positiveIntegerDigits(value)
                version = versionDigits.flatMap { Int($0) }
            // The id and the instant are held to bundle.xsd's patterns here (`LibXML.patternsLeftToTheReader`).
            case .projectID:
                project = UUID(hyphenatedText: value)
                if project == nil { try report(error(.schemaViolation, "projectID: '\(value.prefix(80))' is not a valid uuid"), fatal: false) }
            case .asOf:
                asOf = Timestamp.date(from: value)
                if asOf == nil { try report(error(.schemaViolation, "asOf: '\(value.prefix(80))' is not a valid date"), fatal: false) }
            case .checkpoints:
                // The schema holds each to the pattern and the list to 64 while validating; checked
                // again here, so no text the server never wrote reaches the store.
                checkpoints = value.split(whereSeparator: \.isWhitespace).map(String.init)
                if let bad = BundleCheckpoints.firstInvalid(in: checkpoints) {
                    try report(error(.schemaViolation, "checkpoints: \(bad)"), fatal: true)
                }
            default: break
            }
        }
        xmlTextReaderMoveToElement(reader)
        if let versionText, version == nil, versionDigits != nil {
            // A version past any this build could number is one it does not read, not a broken header.
            try report(error(.unsupportedFormatVersion,
                "format version \(versionText.prefix(40)) is not one this build reads (it reads \(BundleFormat.readableVersionsText))"),
                fatal: true)
        }
        if let version, !BundleFormat.readableVersions.contains(version) {
            try report(error(.unsupportedFormatVersion,
                "format version \(version) is not one this build reads (it reads \(BundleFormat.readableVersionsText))"), fatal: true)
        }
        if version == 1, !checkpoints.isEmpty {
            try report(error(.schemaViolation, "checkpoints came with format version 2; a version 1 bundle has none"), fatal: true)
        }
        try flushErrors(fatal: false)
        guard let version, let project else {
            // Never read past: the header is what holds the records to one project and carries the
            // checkpoints (a `formatVersion` of " 2" dropped it without a word, attack 124, F1).
            try report(error(.schemaViolation,
                "the bundle element needs a formatVersion and a projectID this build reads "
                    + "(formatVersion '\((versionText ?? "none").prefix(40))')"), fatal: true)
            return nil
        }
        return .header(BundleHeader(formatVersion: version, projectID: project, asOf: asOf, checkpoints: checkpoints))
    }

    /// The digits of an `xs:positiveInteger` as libxml2 validates it: XML whitespace around it (the
    /// schema collapses it), an optional `+` and leading zeros left out; nil for any other text. However
    /// many: past `Int`, it is a version no build reads.
    static func positiveIntegerDigits(_ text: String) -> Substring? {
        var body = Substring(FieldText.trimmingXMLWhitespace(text))
        if body.first == "+" { body = body.dropFirst() }
        let digits = body.drop { $0 == "0" }
        guard !digits.isEmpty, body.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return digits
    }

    private func attributeValue() -> String {
        guard let value = xmlTextReaderConstValue(reader) else { return "" }
        return String(cString: value)
    }

    // MARK: Errors

    /// Turns errors libxml2 reported into thrown or collected `BundleError`s.
    ///
    /// The reader parses ahead of the node it returns (it pushes the document in chunks), so a schema
    /// error can arrive before the reader reaches the record it concerns. Such an error waits until the
    /// reader's node reaches the error's line, and then belongs to the record being read if that record
    /// starts at or before it. Fatal errors (and everything at the end) are reported at once.
    private func flushErrors(fatal: Bool) throws(BundleError) {
        guard !sink.errors.isEmpty else { return }
        let current = fatal ? Int.max : currentLine
        var waiting: [XMLErrorSink.Reported] = []
        let errors = sink.errors
        sink.errors.removeAll()
        for reported in errors {
            guard fatal || reported.isFatal || (reported.line ?? 0) <= current else {
                waiting.append(reported)
                continue
            }
            var bundleError = BundleError(reported.code, message: reported.message, line: reported.line,
                column: reported.column)
            if reported.code == .schemaViolation, let partial = record, (reported.line ?? 0) >= partial.line {
                bundleError.entity = partial.shape.description.type
                bundleError.id = partial.id
                record?.broken = true
            }
            do {
                try report(bundleError.located(location), fatal: fatal || reported.isFatal)
            } catch {
                sink.errors = waiting
                throw error
            }
        }
        sink.errors = waiting + sink.errors
    }

    /// The line of the node the reader is on.
    private var currentLine: Int {
        guard let node = xmlTextReaderCurrentNode(reader) else { return Int.max }
        return Int(xmlGetLineNo(node))
    }

    /// Throws `error`, or in collecting mode keeps it (ending the read when it is fatal or the list is full).
    private func report(_ error: BundleError, fatal: Bool) throws(BundleError) {
        guard collecting else {
            finished = true
            throw error
        }
        if collectedErrors.count < limits.maximumReportedErrors { collectedErrors.append(error) }
        if fatal || collectedErrors.count >= limits.maximumReportedErrors {
            finished = true
            throw error
        }
    }

    /// An error at the reader's node. libxml2 2.9 keeps no column for nodes, and the parser's own
    /// position runs ahead of the reader, so these carry the node's line only.
    private func error(_ code: BundleError.Code, _ message: String) -> BundleError {
        var place = location
        place.line = currentLine == Int.max ? Int(xmlTextReaderGetParserLineNumber(reader)) : currentLine
        return BundleError(code, message: message).located(place)
    }

    private func recordError(_ code: BundleError.Code, _ message: String, field: String) -> BundleError {
        var place = location
        place.line = currentLine == Int.max ? Int(xmlTextReaderGetParserLineNumber(reader)) : currentLine
        return BundleError(code, message: message, entity: record?.shape.description.type, id: record?.id, field: field)
            .located(place)
    }

    // MARK: Symbols

    private func internSymbols() {
        var table: [(String, Symbol)] = [
            ("bundle", .bundle), ("files", .files), ("file", .file), ("records", .records), ("id", .id),
            ("serverID", .serverID), ("version", .version), ("createdAt", .createdAt), ("updatedAt", .updatedAt),
            ("deletedAt", .deletedAt), ("name", .name), ("byteSize", .byteSize), ("sha256", .sha256),
            ("formatVersion", .formatVersion), ("projectID", .projectID), ("asOf", .asOf),
            ("checkpoints", .checkpoints),
        ]
        table += EntityType.allCases.map { ($0.rawValue, .entity($0)) }
        for (name, symbol) in table {
            guard let interned = xmlTextReaderConstString(reader, name) else { continue }
            symbols[UnsafeRawPointer(interned)] = symbol
        }
        for description in EntityCatalog.all {
            var fields: [UnsafeRawPointer: FieldSlot] = [:]
            for field in description.fields {
                guard let interned = xmlTextReaderConstString(reader, field.name) else { continue }
                fields[UnsafeRawPointer(interned)] = FieldSlot(name: field.name, kind: field.kind)
            }
            fieldSymbols[description.type] = fields
        }
    }

    private func currentSymbol() -> Symbol? {
        guard let name = xmlTextReaderConstLocalName(reader) else { return nil }
        return symbols[UnsafeRawPointer(name)]
    }

    private enum Symbol: Hashable {
        case bundle, files, file, records, id, serverID, version, createdAt, updatedAt, deletedAt
        case name, byteSize, sha256, formatVersion, projectID, asOf, checkpoints
        case entity(EntityType)
    }

    private enum Section { case outside, bundle, files, records }

    /// A field's name and kind, shared by reference: one retain per field element, not a copy of the
    /// whole description with its strings.
    private final class FieldSlot {
        let name: String
        let kind: FieldKind
        init(name: String, kind: FieldKind) {
            self.name = name
            self.kind = kind
        }
    }

    /// The record being read. A class: a struct this size was copied whole on each field's access
    /// through the optional (`perf`, stop 94).
    private final class PartialRecord {
        let shape: RecordShape
        var fields: [String: FieldValue]
        let line: Int
        init(shape: RecordShape, fields: [String: FieldValue], line: Int) {
            self.shape = shape
            self.fields = fields
            self.line = line
        }
        var id: UUID?
        var serverID: String?
        var version: Int64?
        var createdAt: Date?
        var updatedAt: Date?
        var deletedAt: Date?
        var deletedAtIsValid = true
        var broken = false
    }

    /// `xmlReaderTypes`, as the reader's node type numbers.
    private enum NodeType {
        static let element: Int32 = 1
        static let text: Int32 = 3
        static let cdata: Int32 = 4
        static let entityReference: Int32 = 5
        static let entity: Int32 = 6
        static let documentType: Int32 = 10
        static let whitespace: Int32 = 13
        static let significantWhitespace: Int32 = 14
        static let endElement: Int32 = 15
    }
}

/// Errors libxml2 reports through the reader's structured handler, kept until the reader looks.
final class XMLErrorSink {
    struct Reported {
        var code: BundleError.Code
        var message: String
        var line: Int?
        var column: Int?
        var isFatal: Bool
    }
    var errors: [Reported] = []
}

/// The reader's structured error handler: classifies and keeps the error; warnings are dropped.
private func collectXMLError(_ context: UnsafeMutableRawPointer?, _ error: xmlErrorPtr?) {
    guard let context, let error else { return }
    let sink = Unmanaged<XMLErrorSink>.fromOpaque(context).takeUnretainedValue()
    let level = error.pointee.level
    guard level != XML_ERR_WARNING, level != XML_ERR_NONE, sink.errors.count < 1000 else { return }
    let message = error.pointee.message.map { String(cString: $0) }?
        .trimmingCharacters(in: .whitespacesAndNewlines) ?? "libxml2 error \(error.pointee.code)"
    let domain = Int32(error.pointee.domain)
    let code: BundleError.Code
    let fatal: Bool
    switch domain {
    case Int32(XML_FROM_SCHEMASV.rawValue), Int32(XML_FROM_SCHEMASP.rawValue), Int32(XML_FROM_DATATYPE.rawValue):
        code = .schemaViolation
        fatal = false
    default:
        let number = error.pointee.code
        let entityCodes: Set<Int32> = [
            Int32(XML_ERR_ENTITY_LOOP.rawValue), Int32(XML_ERR_UNDECLARED_ENTITY.rawValue),
            Int32(XML_WAR_UNDECLARED_ENTITY.rawValue), Int32(XML_ERR_ENTITY_BOUNDARY.rawValue),
            Int32(XML_IO_LOAD_ERROR.rawValue), Int32(XML_ERR_EXT_ENTITY_STANDALONE.rawValue),
        ]
        code = entityCodes.contains(number) ? .forbiddenConstruct : .malformedXML
        fatal = true
    }
    let line = error.pointee.line > 0 ? Int(error.pointee.line) : nil
    let column = error.pointee.int2 > 0 ? Int(error.pointee.int2) : nil
    sink.errors.append(.init(code: code, message: message, line: line, column: column, isFatal: fatal))
}

/// libxml2's read callback: pulls the next chunk of the document through `DocumentInput`.
private func readDocument(_ context: UnsafeMutableRawPointer?, _ buffer: UnsafeMutablePointer<CChar>?, _ length: Int32) -> Int32 {
    guard let context, let buffer, length > 0 else { return -1 }
    let input = Unmanaged<DocumentInput>.fromOpaque(context).takeUnretainedValue()
    return Int32(input.read(into: buffer, count: Int(length)))
}
