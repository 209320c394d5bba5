import Clibxml2
import Foundation
import OutpostSchema
import OutpostWire

/// Reads an XML bundle with libxml2's SAX2 push parser, validating it against the embedded `bundle.xsd`
/// as it goes (`xmlSchemaSAXPlug`), so memory stays flat however many records the bundle holds.
///
/// Why SAX and not `xmlTextReader`: the streaming reader builds a tree node for every element, text and
/// whitespace run and frees it again, and hands each over through five calls; over a 50,000-issue server
/// bundle (29.8 MB) libxml2 alone took 0.68 s validating through the reader and 0.40 s through SAX (a
/// C driver of both, same schema, one run), and in `outpost import` of that file (`perf`) libxml2's part
/// of the reading thread went from 0.82 s to 0.51 s of CPU.
///
/// The document is pushed a chunk at a time (`DocumentInput`); the callbacks turn events into items
/// queued for `next()`. Names are compared as pointers: the parser interns every element and attribute
/// name in its dictionary, and ours are interned there too, so no name becomes a Swift string.
///
/// Errors arrive synchronously, between callbacks: the validator checks an element's start after our
/// callback for it and its end after ours. So a finished record (and the header, and a file reference)
/// waits as `pending` until the next event or the end of the chunk, and every error that arrived by then
/// is its own (`settle`): no line arithmetic decides which record an error belongs to.
final class XMLBundleReader: BundleItemReader {
    private let input: DocumentInput
    private let limits: BundleLimits
    private let collecting: Bool
    private let location: SourceLocation
    private let sink = XMLErrorSink()
    /// Our callbacks. The schema's plug keeps pointers to this handler and to the two slots below, and
    /// writes the originals back through them when unplugged: all three live at one address until then.
    private let handler = UnsafeMutablePointer<xmlSAXHandler>.allocate(capacity: 1)
    private let pluggedHandler = UnsafeMutablePointer<xmlSAXHandlerPtr?>.allocate(capacity: 1)
    private let pluggedContext = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
    private let validation: xmlSchemaValidCtxtPtr
    private var plug: xmlSchemaSAXPlugPtr?
    /// Joins the pieces of each run of text before the plug sees them (`XMLTextRuns`); nil where the
    /// plug takes events it cannot pass on.
    private var textRuns: XMLTextRuns?
    /// Each start tag's attributes, counted before the parser sees them (`XMLAttributeCount`).
    private var attributeCount: XMLAttributeCount
    private var parser: xmlParserCtxtPtr?
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    private var symbols: [UnsafeRawPointer: Symbol] = [:]
    /// Each entity's fields by their interned element name: no Swift string per field element.
    /// A list, scanned: a record has tens of fields, and comparing pointers costs less than hashing one.
    private var fieldSymbols: [EntityType: [(name: UnsafeRawPointer, slot: FieldSlot)]] = [:]
    private(set) var collectedErrors: [BundleError] = []

    /// Items made and not yet handed out, in document order.
    private var ready: [BundleItem] = []
    private var readyIndex = 0
    /// What ends the read once `ready` is handed out: the first error (or, collecting, a fatal one).
    private var failure: BundleError? {
        didSet { stopped = failure != nil }
    }
    /// Whether `failure` is set: what every event checks, without copying an error to do so.
    private var stopped = false
    private var finished = false
    private var fedToTheEnd = false
    private var begun = false
    /// Whether a byte other than white space (after a byte-order mark) has been fed: a document with none
    /// is empty, which libxml2 calls "Extra content at the end of the document" (attack 127, F9).
    private var fedContent = false

    private var section = Section.outside
    private var depth = 0
    private var record: PartialRecord?
    private var pending: Pending? {
        didSet { holdsPending = pending != nil }
    }
    private var holdsPending = false
    /// The record `pending` holds, if it holds one.
    private var pendingRecord: PartialRecord? {
        if case .record(let partial) = pending { partial } else { nil }
    }
    /// The open record's entry of `fieldSymbols`, looked up once per record rather than once per field.
    private var recordFields: [(name: UnsafeRawPointer, slot: FieldSlot)] = []
    /// The field element being read; nil between fields and for one the catalog does not have.
    private var openField: FieldSlot?
    /// The open field's text so far, as libxml2 hands it over (UTF-8, entities and references replaced).
    private var fieldBytes: [UInt8] = []
    /// A value our parsers refused, held until the validator had its say about the same element: its
    /// error (naming the element and the type) goes first, and ours only when it said nothing.
    private var valueError: BundleError? {
        didSet { holdsValueError = valueError != nil }
    }
    private var holdsValueError = false
    /// Bytes of text since the last tag outside any field: white space between elements, which nothing
    /// keeps, bounded as a value is, or a server answering with endless spaces keeps a device reading.
    private var looseTextBytes = 0

    var bytesRead: Int64 { input.bytesRead }

    init(path: String, displayName: String, archiveEntry: String?, limits: BundleLimits, collecting: Bool,
        arrival: BundleArrival? = nil
    ) throws(BundleError) {
        LibXML.prepare()
        location = SourceLocation(file: displayName, archiveEntry: archiveEntry)
        try XMLProlog.check(path: path, location: location)
        input = try DocumentInput(path: path, limit: limits.maximumDocumentBytes, arrival: arrival)
        self.limits = limits
        self.collecting = collecting
        attributeCount = XMLAttributeCount(limit: limits.maximumObjectMembers)
        guard let validation = xmlSchemaNewValidCtxt(LibXML.schema) else {
            handler.deallocate()
            pluggedHandler.deallocate()
            pluggedContext.deallocate()
            throw BundleError(.unreadableFile, message: "libxml2 could not start the bundle schema's validator", file: displayName)
        }
        self.validation = validation
        handler.initialize(to: XMLBundleReader.callbacks())
        pluggedHandler.initialize(to: handler)
        pluggedContext.initialize(to: Unmanaged.passUnretained(self).toOpaque())
        xmlSchemaSetValidStructuredErrors(validation, collectXMLError, Unmanaged.passUnretained(sink).toOpaque())
        plug = xmlSchemaSAXPlug(validation, pluggedHandler, pluggedContext)
        var parser: xmlParserCtxtPtr?
        if plug != nil, let plugged = pluggedHandler.pointee, XMLTextRuns.canStandBefore(plugged.pointee) {
            let runs = XMLTextRuns(plug: plugged.pointee, context: pluggedContext.pointee)
            textRuns = runs
            // The parser copies the callbacks it is given.
            var front = runs.handler()
            parser = xmlCreatePushParserCtxt(&front, runs.context, nil, 0, displayName)
        } else if plug != nil {
            parser = xmlCreatePushParserCtxt(pluggedHandler.pointee, pluggedContext.pointee, nil, 0, displayName)
        }
        guard let parser else {
            throw BundleError(.unreadableFile, message: "libxml2 could not start a parser", file: displayName)
        }
        self.parser = parser
        // UTF-8 whatever the document says (`XMLProlog` refuses any other declared encoding).
        guard xmlCtxtResetPush(parser, nil, 0, displayName, "UTF-8") == 0 else {
            throw BundleError(.unreadableFile, message: "libxml2 could not start a parser", file: displayName)
        }
        _ = xmlCtxtUseOptions(parser, LibXML.parserOptions)
        sink.parser = parser
        internSymbols(in: parser.pointee.dict)
    }

    deinit {
        if let parser { xmlFreeParserCtxt(parser) }
        if let plug { _ = xmlSchemaSAXUnplug(plug) }
        xmlSchemaFreeValidCtxt(validation)
        handler.deallocate()
        pluggedHandler.deallocate()
        pluggedContext.deallocate()
    }

    func next() throws(BundleError) -> BundleItem? {
        while true {
            if readyIndex < ready.count {
                let item = ready[readyIndex]
                readyIndex += 1
                return item
            }
            ready.removeAll(keepingCapacity: true)
            readyIndex = 0
            if let failure {
                guard !finished else { return nil }
                finished = true
                throw failure
            }
            if fedToTheEnd { return nil }
            feed()
        }
    }

    /// XML's white space (`S`, XML 1.0 §2.3).
    private static let whiteSpace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]

    /// Pushes the next chunk of the document (or its end) through the parser.
    private func feed() {
        guard let parser else { return }
        // libxml2 2.9 reports parse errors through the thread's structured handler (the validator's go
        // to the sink directly): set for exactly the span of this call, and restored afterwards.
        let previous = (__xmlStructuredError()?.pointee, __xmlStructuredErrorContext()?.pointee)
        xmlSetStructuredErrorFunc(Unmanaged.passUnretained(sink).toOpaque(), collectXMLError)
        defer { xmlSetStructuredErrorFunc(previous.1, previous.0) }
        let count = chunk.withUnsafeMutableBytes { input.read(into: $0.baseAddress!, count: $0.count) }
        // A UTF-8 byte-order mark: the parser, told the encoding, takes it for content (attack 127, F7).
        let start = !begun && count >= 3 && chunk[0] == 0xEF && chunk[1] == 0xBB && chunk[2] == 0xBF ? 3 : 0
        begun = true
        if count < 0 || input.failed {
            settle()
            report(input.failed ? input.failure : error(.malformedXML, "the document could not be read"), fatal: true)
            return
        }
        if count == 0 {
            fedToTheEnd = true
            guard fedContent else {
                report(error(.malformedXML, "the document is empty: a bundle is one <bundle> element"), fatal: true)
                return
            }
            textRuns?.passOnFromNow()
            _ = xmlParseChunk(parser, nil, 0, 1)
            // Cut off: elements are still open, or none began. libxml2 says "Extra content at the end of
            // the document" of that, which sends a user looking for content that is not there (F9).
            if !stopped, depth > 0 || section == .outside {
                let cutOff = section == .outside
                    ? "the document ends before its <bundle> element begins"
                    : "the document ends with \(depth) element\(depth == 1 ? "" : "s") still open: it is cut off"
                for index in sink.errors.indices where sink.errors[index].isDocumentEnd {
                    sink.errors[index].message = cutOff
                }
                // What the validator says of the elements the cut left unfinished ("Missing child
                // element(s)") follows from the cut: the cut is told first.
                sink.errors = sink.errors.filter(\.isFatal) + sink.errors.filter { !$0.isFatal }
            }
            settle()
            if !stopped, parser.pointee.wellFormed == 0 {
                report(error(.malformedXML, "the document ends or breaks here"), fatal: true)
            }
            return
        }
        if !fedContent {
            fedContent = chunk[start..<count].contains { !Self.whiteSpace.contains($0) }
        }
        // A tag past the attribute limit is refused before libxml2 sees it (`XMLAttributeCount`). What comes
        // before it is parsed first, so an error there is told first (and a validation collects the
        // records before it); libxml2 parses a start tag only once its `>` has come, and none is fed.
        let verdict = chunk.withUnsafeBytes { attributeCount.scan(UnsafeRawBufferPointer(rebasing: $0[start..<count])) }
        var fed = count - start
        if case .pastTheLimit(let tagStart) = verdict { fed = tagStart ?? 0 }
        if fed > 0 || verdict == .within {
            _ = chunk.withUnsafeBytes { bytes in
                xmlParseChunk(parser, bytes.baseAddress!.assumingMemoryBound(to: CChar.self) + start, Int32(fed), 0)
            }
        }
        // The chunk's last run of text goes on before its errors are settled, as it did unjoined.
        textRuns?.flush()
        settle()
        guard verdict != .within else { return }
        var place = location
        place.line = attributeCount.line
        report(
            BundleError(
                .limitExceeded,
                message: "an element has more than \(limits.maximumObjectMembers) attributes, namespace declarations and xsi: attributes included; no element the bundle format declares has more than six"
            ).located(place),
            fatal: true)
    }

    // MARK: Events

    /// The errors that arrived since the last event, each the pending item's or else the open record's;
    /// then the pending item, unless an error broke it.
    private func settle() {
        guard holdsPending || holdsValueError || !sink.errors.isEmpty else { return }
        var schemaSpoke = false
        if !sink.errors.isEmpty {
            let errors = sink.errors
            sink.errors.removeAll()
            for reported in errors {
                schemaSpoke = schemaSpoke || reported.code == .schemaViolation
                var bundleError = BundleError(reported.code, message: reported.message, line: reported.line,
                    column: reported.column)
                if reported.code == .schemaViolation, let partial = pendingRecord ?? record {
                    bundleError.entity = partial.shape.description.type
                    bundleError.id = partial.id
                    partial.broken = true
                }
                report(bundleError.located(location), fatal: reported.isFatal)
            }
        }
        if holdsValueError, let held = valueError {
            valueError = nil
            if !schemaSpoke { report(held, fatal: false) }
        }
        guard holdsPending, let waiting = pending else { return }
        pending = nil
        guard !stopped || collecting else { return }
        switch waiting {
        case .record(let partial):
            if let item = finishRecord(partial) { ready.append(item) }
        case .item(let item):
            // A header or file reference the schema refused goes no further.
            if !stopped { ready.append(item) }
        }
    }

    fileprivate func startElement(
        _ name: UnsafePointer<xmlChar>?, attributeCount: Int, attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    ) {
        settle()
        guard !stopped else { return }
        looseTextBytes = 0
        let level = depth
        depth += 1
        if level > limits.maximumDepth {
            report(error(.limitExceeded, "elements nest deeper than \(limits.maximumDepth) levels"), fatal: true)
            return
        }
        // A field's element (most of them) is looked up among its record's fields only.
        let symbol = level < 3 ? symbol(name.map(UnsafeRawPointer.init)) : nil
        let attributes = Attributes(count: attributeCount, base: attributes)
        switch (level, section, symbol) {
        case (0, _, .bundle):
            section = .bundle
            if let header = header(attributes) { pending = .item(header) }
        case (1, _, .files):
            section = .files
        case (1, _, .records):
            section = .records
        case (2, .files, .file):
            if let file = fileReference(attributes) { pending = .item(file) }
        case (2, .records, .entity(let entity)):
            record = startRecord(entity, attributes)
        case (3, .records, _):
            guard let shape = record?.shape, let name,
                let field = recordFields.first(where: { $0.name == UnsafeRawPointer(name) })?.slot
                    ?? shape.description.field(named: String(cString: name)).map({ FieldSlot(name: $0.name, kind: $0.kind) })
            else {
                // The schema reports it; a collecting read keeps going without it.
                openField = nil
                return
            }
            openField = field
            fieldBytes.removeAll(keepingCapacity: true)
        default:
            break  // anything else is the schema's to report
        }
    }

    fileprivate func endElement() {
        settle()
        guard !stopped else { return }
        looseTextBytes = 0
        depth -= 1
        switch (depth, section) {
        case (3, .records):
            if openField != nil { finishField() }
        case (2, .records):
            if let partial = record {
                record = nil
                // Errors about its content (a missing field) come with the validator's end, after this.
                pending = .record(partial)
            }
        case (1, _):
            section = .bundle
        default:
            break
        }
    }

    fileprivate func characters(_ text: UnsafePointer<xmlChar>?, count: Int) {
        // A record just ended is settled first: an error about this text is not its (attack 127, F10).
        settle()
        guard openField != nil else {
            looseTextBytes += count
            if looseTextBytes > limits.maximumStringBytes, !stopped {
                report(error(.limitExceeded,
                    "a run of white space or text between elements is longer than \(limits.maximumStringBytes) bytes, the most a value may take"),
                    fatal: true)
            }
            return
        }
        guard !stopped, let text, count > 0 else { return }
        fieldBytes.append(contentsOf: UnsafeBufferPointer(start: text, count: count))
        if fieldBytes.count > limits.maximumStringBytes {
            let message = "a value is longer than \(limits.maximumStringBytes) bytes of UTF-8 (the schema's maxLength counts characters)"
            // Named by its record and field when it is one, as every other error about a value is.
            let field = record == nil ? nil : openField
            report(field.map { recordError(.limitExceeded, message, field: $0.name) } ?? error(.limitExceeded, message), fatal: true)
        }
    }

    fileprivate func refuse(_ code: BundleError.Code, _ message: String) {
        settle()
        report(error(code, message), fatal: true)
    }

    private func finishField() {
        guard let field = openField, let partial = record else { return }
        openField = nil
        let text = String(decoding: fieldBytes, as: UTF8.self)
        // Ids and instants are held to bundle.xsd's patterns here (`LibXML.patternsLeftToTheReader`):
        // their parsers take no text the patterns refuse.
        guard let value = FieldText.value(ofXMLText: text, kind: field.kind) else {
            partial.broken = true
            valueError = recordError(.schemaViolation, "'\(text.prefix(80))' is not a valid \(field.kind.storageKind)", field: field.name)
            return
        }
        partial.fields[field.name] = value
    }

    // MARK: Records, files, header

    private func startRecord(_ entity: EntityType, _ attributes: Attributes) -> PartialRecord {
        guard let shape = RecordShape.all[entity] else { preconditionFailure("no shape for \(entity)") }
        let line = currentLine
        let partial = PartialRecord(shape: shape, fields: shape.emptyFields, line: line)
        var id: String?, serverID: String?, version: String?, created: String?, updated: String?, deleted: String?
        for index in 0..<attributes.count {
            switch symbol(attributes.name(index)) {
            case .id: id = attributes.value(index)
            case .serverID: serverID = attributes.value(index)
            case .version: version = attributes.value(index)
            case .createdAt: created = attributes.value(index)
            case .updatedAt: updated = attributes.value(index)
            case .deletedAt: deleted = attributes.value(index)
            default: break  // the schema reports unknown attributes
            }
        }
        recordFields = fieldSymbols[entity] ?? []
        partial.id = id.flatMap(UUID.init(hyphenatedText:))
        partial.serverID = serverID
        partial.version = version.flatMap { Int64($0) }
        partial.createdAt = created.flatMap(Timestamp.date(from:))
        partial.updatedAt = updated.flatMap(Timestamp.date(from:))
        partial.deletedAt = deleted.flatMap(Timestamp.date(from:))
        partial.deletedAtIsValid = deleted == nil || partial.deletedAt != nil
        // The id and the instants are held to bundle.xsd's patterns here, not by libxml2
        // (`LibXML.patternsLeftToTheReader`): each text the parsers above did not take is refused.
        func reject(_ attribute: String, _ code: BundleError.Code, _ message: String, fatal: Bool) {
            partial.broken = true
            var place = location
            place.line = line
            report(BundleError(code, message: message, entity: entity, id: partial.id, field: attribute).located(place), fatal: fatal)
        }
        func refuse(_ attribute: String, _ text: String?, parsed: Bool, as kind: FieldKind) {
            guard let text, !parsed else { return }
            reject(attribute, .schemaViolation, "'\(text.prefix(80))' is not a valid \(kind.storageKind)", fatal: false)
        }
        // A server id is a text, held to the limit every text is (the JSON reader's holds each string to
        // it): an XML record took a 2 MiB one, a JSON one was refused (attack 129, F2).
        if let serverID, serverID.utf8.count > limits.maximumStringBytes {
            reject(
                "serverID", .limitExceeded,
                "the server id is longer than \(limits.maximumStringBytes) bytes of UTF-8 (the schema's maxLength counts characters)",
                fatal: true)
        }
        refuse("id", id, parsed: partial.id != nil, as: .uuid)
        refuse("createdAt", created, parsed: partial.createdAt != nil, as: .date)
        refuse("updatedAt", updated, parsed: partial.updatedAt != nil, as: .date)
        refuse("deletedAt", deleted, parsed: partial.deletedAt != nil, as: .date)
        return partial
    }

    private func finishRecord(_ partial: PartialRecord) -> BundleItem? {
        var place = location
        place.line = partial.line
        guard !partial.broken, let id = partial.id, let version = partial.version, let createdAt = partial.createdAt,
            let updatedAt = partial.updatedAt, partial.deletedAtIsValid
        else {
            if !partial.broken && !collecting {
                // Unreachable when the schema holds; kept so a record is never built from half its metadata.
                report(
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

    private func fileReference(_ attributes: Attributes) -> BundleItem? {
        var place = location
        place.line = currentLine
        var name: String?, size: Int64?, digest: String?
        for index in 0..<attributes.count {
            switch symbol(attributes.name(index)) {
            case .name: name = attributes.value(index)
            case .byteSize: size = Int64(attributes.value(index))
            case .sha256: digest = attributes.value(index)
            default: break
            }
        }
        guard let name, let size, let digest else { return nil }
        return .file(FileReference(name: name, byteSize: size, sha256: digest), place)
    }

    private func header(_ attributes: Attributes) -> BundleItem? {
        var version: Int?, versionText: String?, versionDigits: Substring?, project: UUID?, asOf: Date?, checkpoints: [String] = []
        for index in 0..<attributes.count {
            guard let symbol = symbol(attributes.name(index)), [.formatVersion, .projectID, .asOf, .checkpoints].contains(symbol) else { continue }
            let value = attributes.value(index)
            switch symbol {
            case .formatVersion:
                versionText = value
                versionDigits = Self.positiveIntegerDigits(value)
                version = versionDigits.flatMap { Int($0) }
            // The id and the instant are held to bundle.xsd's patterns here (`LibXML.patternsLeftToTheReader`).
            case .projectID:
                project = UUID(hyphenatedText: value)
                if project == nil { report(error(.schemaViolation, "projectID: '\(value.prefix(80))' is not a valid uuid"), fatal: false) }
            case .asOf:
                asOf = Timestamp.date(from: value)
                if asOf == nil { report(error(.schemaViolation, "asOf: '\(value.prefix(80))' is not a valid date"), fatal: false) }
            case .checkpoints:
                // The schema holds each to the pattern and the list to 64 while validating; checked
                // again here, so no text the server never wrote reaches the store.
                checkpoints = value.split(whereSeparator: \.isWhitespace).map(String.init)
                if let bad = BundleCheckpoints.firstInvalid(in: checkpoints) {
                    report(error(.schemaViolation, "checkpoints: \(bad)"), fatal: true)
                }
            default: break
            }
        }
        if let versionText, version == nil, versionDigits != nil {
            // A version past any this build could number is one it does not read, not a broken header.
            report(error(.unsupportedFormatVersion,
                "format version \(versionText.prefix(40)) is not one this build reads (it reads \(BundleFormat.readableVersionsText))"),
                fatal: true)
        }
        if let version, !BundleFormat.readableVersions.contains(version) {
            report(error(.unsupportedFormatVersion,
                "format version \(version) is not one this build reads (it reads \(BundleFormat.readableVersionsText))"), fatal: true)
        }
        if version == 1, !checkpoints.isEmpty {
            report(error(.schemaViolation, "checkpoints came with format version 2; a version 1 bundle has none"), fatal: true)
        }
        guard let version, let project else {
            // Never read past: the header is what holds the records to one project and carries the
            // checkpoints (a `formatVersion` of " 2" dropped it without a word, attack 124, F1).
            report(error(.schemaViolation,
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

    // MARK: Errors

    /// The line the parser is on.
    private var currentLine: Int {
        guard let parser else { return 0 }
        return Int(xmlSAX2GetLineNumber(parser))
    }

    /// Keeps `error` to throw once the items before it are handed out, or in collecting mode keeps it in
    /// the list (ending the read when it is fatal or the list is full). Ending the read feeds the parser
    /// nothing more, and every event after it is ignored; the parser is never stopped from inside a
    /// callback: libxml2 2.9's fast path for ASCII text read on from the input it had just freed, and a
    /// value or a run of white space just past the limit crashed the import (attack 127, F1 and F2).
    private func report(_ error: BundleError, fatal: Bool) {
        guard !stopped else { return }
        if collecting, collectedErrors.count < limits.maximumReportedErrors { collectedErrors.append(error) }
        guard !collecting || fatal || collectedErrors.count >= limits.maximumReportedErrors else { return }
        failure = error
    }

    /// An error at the parser's line. libxml2 keeps no column for SAX events, so these carry the line only.
    private func error(_ code: BundleError.Code, _ message: String) -> BundleError {
        var place = location
        place.line = currentLine
        return BundleError(code, message: message).located(place)
    }

    private func recordError(_ code: BundleError.Code, _ message: String, field: String) -> BundleError {
        var place = location
        place.line = currentLine
        return BundleError(code, message: message, entity: record?.shape.description.type, id: record?.id, field: field)
            .located(place)
    }

    // MARK: Symbols

    private func internSymbols(in dictionary: xmlDictPtr?) {
        var table: [(String, Symbol)] = [
            ("bundle", .bundle), ("files", .files), ("file", .file), ("records", .records), ("id", .id),
            ("serverID", .serverID), ("version", .version), ("createdAt", .createdAt), ("updatedAt", .updatedAt),
            ("deletedAt", .deletedAt), ("name", .name), ("byteSize", .byteSize), ("sha256", .sha256),
            ("formatVersion", .formatVersion), ("projectID", .projectID), ("asOf", .asOf),
            ("checkpoints", .checkpoints),
        ]
        table += EntityType.allCases.map { ($0.rawValue, .entity($0)) }
        for (name, symbol) in table {
            guard let interned = xmlDictLookup(dictionary, name, -1) else { continue }
            symbols[UnsafeRawPointer(interned)] = symbol
        }
        for description in EntityCatalog.all {
            var fields: [(name: UnsafeRawPointer, slot: FieldSlot)] = []
            for field in description.fields {
                guard let interned = xmlDictLookup(dictionary, field.name, -1) else { continue }
                fields.append((UnsafeRawPointer(interned), FieldSlot(name: field.name, kind: field.kind)))
            }
            fieldSymbols[description.type] = fields
        }
    }

    private func symbol(_ name: UnsafeRawPointer?) -> Symbol? {
        name.flatMap { symbols[$0] }
    }

    private enum Symbol: Hashable {
        case bundle, files, file, records, id, serverID, version, createdAt, updatedAt, deletedAt
        case name, byteSize, sha256, formatVersion, projectID, asOf, checkpoints
        case entity(EntityType)
    }

    private enum Section { case outside, bundle, files, records }

    /// What waits for the errors the validator may still report about it (see `settle`).
    private enum Pending {
        case record(PartialRecord)
        case item(BundleItem)
    }

    /// A start tag's attributes as SAX2 hands them over: five pointers each (local name, prefix, URI,
    /// value start, value end), names interned, values not terminated.
    private struct Attributes {
        let count: Int
        let base: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?

        func name(_ index: Int) -> UnsafeRawPointer? {
            base?[index * 5].map(UnsafeRawPointer.init)
        }

        /// The value as the tree would hold it. Without entity substitution (never asked for), the
        /// parser leaves an `&` a value held, written `&amp;` or `&#38;`, as the text `&#38;` for the
        /// tree builder to turn back; every other reference it has already replaced.
        func value(_ index: Int) -> String {
            guard let base, let start = base[index * 5 + 3], let end = base[index * 5 + 4] else { return "" }
            let bytes = UnsafeBufferPointer(start: start, count: end - start)
            let text = String(decoding: bytes, as: UTF8.self)
            return bytes.contains(0x26) ? text.replacingOccurrences(of: "&#38;", with: "&") : text
        }
    }

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

    /// The SAX2 callbacks, each handing its event to the reader its context names. Only what a bundle
    /// may hold is asked for; a DOCTYPE (refused before parsing too, `XMLProlog`) and any entity
    /// reference end the read.
    private static func callbacks() -> xmlSAXHandler {
        var handler = xmlSAXHandler()
        handler.initialized = XML_SAX2_MAGIC
        handler.startElementNs = { context, name, _, _, _, _, attributeCount, _, attributes in
            reader(context)?.startElement(name, attributeCount: Int(attributeCount), attributes: attributes)
        }
        handler.endElementNs = { context, _, _, _ in reader(context)?.endElement() }
        handler.characters = { context, text, count in reader(context)?.characters(text, count: Int(count)) }
        handler.cdataBlock = { context, text, count in reader(context)?.characters(text, count: Int(count)) }
        handler.internalSubset = { context, _, _, _ in
            reader(context)?.refuse(.forbiddenConstruct, "a DOCTYPE (DTD) is not allowed in a bundle")
        }
        handler.reference = { context, _ in
            reader(context)?.refuse(.forbiddenConstruct, "entity references are not allowed in a bundle")
        }
        return handler
    }
}

private func reader(_ context: UnsafeMutableRawPointer?) -> XMLBundleReader? {
    context.map { Unmanaged<XMLBundleReader>.fromOpaque($0).takeUnretainedValue() }
}

/// Errors libxml2 reports through the structured handlers, kept until the reader looks.
final class XMLErrorSink {
    /// The parser whose line an error without one (the validator's, in SAX mode) is stamped with.
    var parser: xmlParserCtxtPtr?
    struct Reported {
        var code: BundleError.Code
        var message: String
        var line: Int?
        var column: Int?
        var isFatal: Bool
        /// libxml2's "Extra content at the end of the document" (`XML_ERR_DOCUMENT_END`), which its push
        /// parser also says of a document that ends with elements open.
        var isDocumentEnd = false
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
    let line = error.pointee.line > 0 ? Int(error.pointee.line) : sink.parser.map { Int(xmlSAX2GetLineNumber($0)) }
    let column = error.pointee.int2 > 0 ? Int(error.pointee.int2) : nil
    sink.errors.append(.init(
        code: code, message: message, line: line, column: column, isFatal: fatal,
        isDocumentEnd: domain != Int32(XML_FROM_SCHEMASV.rawValue) && error.pointee.code == Int32(XML_ERR_DOCUMENT_END.rawValue)))
}
