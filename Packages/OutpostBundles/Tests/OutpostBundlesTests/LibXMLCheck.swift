import Clibxml2
import Foundation

/// Compiles an XSD with libxml2 and validates a document against it: what `xmllint --schema` does,
/// in process (the test machine need not have xmllint).
enum LibXMLCheck {
    struct Failure: Error { let message: String }

    /// The validation errors' messages; empty when the document is valid.
    static func errors(validating document: String, against xsd: String) throws -> [String] {
        let schemaBytes = Array(xsd.utf8)
        guard let parser = schemaBytes.withUnsafeBufferPointer({ buffer in
            buffer.baseAddress.map { $0.withMemoryRebound(to: CChar.self, capacity: buffer.count) { xmlSchemaNewMemParserCtxt($0, Int32(buffer.count)) } } ?? nil
        }) else { throw Failure(message: "no schema parser") }
        defer { xmlSchemaFreeParserCtxt(parser) }
        guard let schema = xmlSchemaParse(parser) else { throw Failure(message: "the XSD does not compile") }
        defer { xmlSchemaFree(schema) }
        let bytes = Array(document.utf8)
        guard let doc = bytes.withUnsafeBufferPointer({ buffer in
            buffer.baseAddress.map { $0.withMemoryRebound(to: CChar.self, capacity: buffer.count) { xmlReadMemory($0, Int32(buffer.count), "doc.xml", nil, Int32(XML_PARSE_NONET.rawValue)) } } ?? nil
        }) else { return ["not well-formed"] }
        defer { xmlFreeDoc(doc) }
        guard let validator = xmlSchemaNewValidCtxt(schema) else { throw Failure(message: "no validator") }
        defer { xmlSchemaFreeValidCtxt(validator) }
        // The verdict is the result; libxml2's own printing of each error would only fill the test log.
        xmlSchemaSetValidStructuredErrors(validator, { _, _ in }, nil)
        let result = xmlSchemaValidateDoc(validator, doc)
        return result == 0 ? [] : ["invalid (\(result))"]
    }
}
