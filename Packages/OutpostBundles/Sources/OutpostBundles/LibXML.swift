import Clibxml2
import Foundation

/// libxml2's process-wide state, set once and thread-safely (a `static let` runs its initializer exactly
/// once, under the runtime's once-lock).
///
/// Why here and only here: libxml2 keeps some settings per process, not per parser. `xmlInitParser` must
/// run before threads parse; the external entity loader is one global function pointer, so it is replaced
/// once with `refuseExternalResource`, which loads nothing, ever (no file, no network). Our bundles never
/// reference an external resource, and 2.9.14 has no per-parser loader (`xmlCtxtSetResourceLoader` is
/// 2.14). Foundation's `XMLParser` installs a loader of its own; a process that uses it after us could
/// replace ours, so the reader does not rely on the loader alone: it never passes `XML_PARSE_NOENT`,
/// `XML_PARSE_DTDLOAD` or `XML_PARSE_HUGE`, always passes `XML_PARSE_NONET`, and refuses any DOCTYPE.
/// Parse errors go through the thread's structured error handler, set and restored around each chunk
/// (see XMLBundleReader). The compiled XSD is immutable after parsing and shared by every validation
/// context.
enum LibXML {
    /// Runs the one-time setup; cheap after the first call.
    static func prepare() { _ = setUp }

    /// The compiled `bundle.xsd`, from the embedded text.
    static var schema: xmlSchemaPtr { compiledSchema.pointer }

    /// The runtime library's version as a number (20914 for 2.9.14).
    static let runtimeVersion: Int = __xmlParserVersion()?.pointee.flatMap { Int(String(cString: $0)) } ?? 0

    /// The parser options every bundle is read with: no network, no entity substitution, no DTD loading,
    /// no `XML_PARSE_HUGE`; plus `XML_PARSE_NO_XXE` where the library has it (2.13 and later).
    /// Not `XML_PARSE_NOCDATA`: with it the streaming reader of before handed over no node for a CDATA
    /// section, so its text was dropped without a word (`<title>a<![CDATA[b]]>c</title>` read as "ac");
    /// without it a CDATA section comes as a block of its own, read as the text it is.
    static var parserOptions: Int32 {
        var options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
        options |= Int32(XML_PARSE_COMPACT.rawValue)
        if runtimeVersion >= 21300 { options |= 1 << 23 }  // XML_PARSE_NO_XXE, absent from 2.9's headers
        return options
    }

    private static let setUp: Void = {
        xmlInitParser()
        xmlSetExternalEntityLoader(refuseExternalResource)
    }()

    private static let compiledSchema: SchemaBox = {
        prepare()
        let text = Array(validatingXSD.utf8)
        // The parser context points into the buffer without copying it: parse while the buffer lives.
        let schema = text.withUnsafeBufferPointer { bytes -> xmlSchemaPtr? in
            bytes.withMemoryRebound(to: CChar.self) { characters -> xmlSchemaPtr? in
                guard let parser = xmlSchemaNewMemParserCtxt(characters.baseAddress, Int32(characters.count)) else { return nil }
                defer { xmlSchemaFreeParserCtxt(parser) }
                return xmlSchemaParse(parser)
            }
        }
        guard let schema else {
            preconditionFailure("the embedded bundle.xsd does not compile; BundleSchemaTests should have caught it")
        }
        return SchemaBox(pointer: schema)
    }()
}

extension LibXML {
    /// `bundle.xsd` as the validator compiles it: the same language, one content model spelled differently,
    /// and two patterns checked by the reader instead (`patternsLeftToTheReader`).
    ///
    /// Why: the frozen schema says `<records>` holds `<xs:choice minOccurs="0" maxOccurs="unbounded">` of
    /// the record elements. libxml2 2.9 compiles that repeated choice into an automaton it does not treat as
    /// deterministic, and its streaming validator then keeps a rollback entry for every child of the open
    /// `<records>` element: about 100 bytes per record, 100 MB for a million (`xmllint --stream --schema`
    /// shows the same growth). The equivalent `<xs:sequence minOccurs="0" maxOccurs="unbounded">` around a
    /// plain `<xs:choice>` (zero or more of one-of-these, like before) compiles to a deterministic automaton
    /// that keeps nothing. The published schema, `BundleSchema.xsd`, stays byte for byte the frozen file;
    /// `BundleSchemaTests` checks that this is its only difference and that both accept the same documents.
    static let validatingXSD: String = {
        let schema = BundleSchema.xsd
        let repeatedChoice = "<xs:choice minOccurs=\"0\" maxOccurs=\"unbounded\">"
        guard let open = schema.range(of: repeatedChoice),
            schema.range(of: repeatedChoice, range: open.upperBound..<schema.endIndex) == nil,
            let close = schema.range(of: "</xs:choice>", range: open.upperBound..<schema.endIndex)
        else {
            preconditionFailure("bundle.xsd no longer has the one repeated choice LibXML.validatingXSD rewrites")
        }
        var validating = String(schema[..<open.lowerBound])
        validating += "<xs:sequence minOccurs=\"0\" maxOccurs=\"unbounded\"><xs:choice>"
        validating += schema[open.upperBound..<close.upperBound]
        validating += "</xs:sequence>"
        validating += schema[close.upperBound...]
        for type in patternsLeftToTheReader {
            guard let start = validating.range(of: "<xs:simpleType name=\"\(type)\">"),
                let end = validating.range(of: "</xs:simpleType>", range: start.upperBound..<validating.endIndex),
                let pattern = validating.range(of: #"<xs:pattern value="[^"]*"/>"#, options: .regularExpression,
                    range: start.upperBound..<end.lowerBound)
            else {
                preconditionFailure("bundle.xsd no longer has the \(type) pattern LibXML.validatingXSD leaves to the reader")
            }
            validating.removeSubrange(pattern)
        }
        return validating
    }()

    /// The simple types whose pattern the reader checks instead of libxml2: every id and instant of every
    /// record. Why: libxml2 2.9 runs an XSD pattern through its general automaton, counters and all, and
    /// those two patterns were a third of a validated parse (`xmllint --stream --schema` over a 50,000-issue
    /// server bundle: 0.34 s with them, 0.22 s without, 0.14 s with no schema; `perf` on an import:
    /// `xmlRegexpExec` 14% of the reader's thread). The reader already turns each such value into a `UUID`
    /// or a `Date`, with parsers that take exactly the `uuid` pattern's texts and, of the `timestamp`
    /// pattern's, those that name a real instant, and refuses the value otherwise (`ValuePatternTests`
    /// walks the law against the published schema). The other patterns are checked by libxml2 as written.
    static let patternsLeftToTheReader = ["uuid", "timestamp"]
}

/// The compiled schema: created once, never mutated or freed afterwards, so sharing it is safe.
private struct SchemaBox: @unchecked Sendable {
    let pointer: xmlSchemaPtr
}

/// The external entity loader: bundles reference no external resource, so every request is refused.
private func refuseExternalResource(
    _ url: UnsafePointer<CChar>?, _ id: UnsafePointer<CChar>?, _ context: xmlParserCtxtPtr?
) -> xmlParserInputPtr? {
    nil
}
