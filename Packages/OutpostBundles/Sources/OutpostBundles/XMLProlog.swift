import Foundation

/// Refuses a DTD before libxml2 sees one. Bundles never have a DOCTYPE, and a DTD is where XXE and
/// entity-expansion attacks live; checking the prolog's bytes first means libxml2's DTD, entity and
/// validation code never runs on hostile declarations, whatever its version or global settings.
enum XMLProlog {
    /// The largest prolog read (XML declaration, comments, processing instructions before the root).
    static let maximumBytes = 64 * 1024

    /// Throws unless the document's prolog holds only an XML declaration, comments and processing
    /// instructions.
    static func check(path: String, location: SourceLocation) throws(BundleError) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BundleError(.unreadableFile, message: "cannot open the file", file: path)
        }
        defer { try? handle.close() }
        let head = [UInt8]((try? handle.read(upToCount: maximumBytes)) ?? Data())
        func starts(_ text: String, at offset: Int) -> Bool {
            let bytes = Array(text.utf8)
            return offset + bytes.count <= head.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        // The check reads bytes as UTF-8; a document in another encoding could hide a DOCTYPE from it,
        // so bundles are UTF-8 only (the reader also tells libxml2 so): no UTF-16/32 byte-order mark,
        // no other declared encoding.
        if head.starts(with: [0xFE, 0xFF]) || head.starts(with: [0xFF, 0xFE]) || head.starts(with: [0x00, 0x00])
            || (head.count >= 2 && (head[0] == 0x00 || head[1] == 0x00))
        {
            throw BundleError(.forbiddenConstruct, message: "a bundle is UTF-8; this file is UTF-16 or UTF-32", line: 1)
                .located(location)
        }
        if starts("<?xml", at: head.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0),
            let end = head.firstIndex(of: 0x3E),
            let declaration = String(bytes: head[..<end], encoding: .utf8)?.lowercased(),
            let range = declaration.range(of: "encoding")
        {
            let value = declaration[range.upperBound...].drop { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "'" }
                .prefix { $0 != "\"" && $0 != "'" && $0 != " " && $0 != "?" }
            guard value == "utf-8" || value == "utf8" else {
                throw BundleError(.forbiddenConstruct, message: "a bundle is UTF-8; this one declares encoding '\(value)'", line: 1)
                    .located(location)
            }
        }
        var index = 0
        func skip(past terminator: String) -> Bool {
            let bytes = Array(terminator.utf8)
            while index + bytes.count <= head.count {
                if Array(head[index..<index + bytes.count]) == bytes {
                    index += bytes.count
                    return true
                }
                index += 1
            }
            return false
        }
        while index < head.count {
            guard head[index] == 0x3C else {
                index += 1
                continue
            }
            if starts("<?", at: index) {
                guard skip(past: "?>") else { break }
            } else if starts("<!--", at: index) {
                guard skip(past: "-->") else { break }
            } else if starts("<!", at: index) {
                var place = location
                place.line = head[..<index].filter { $0 == 0x0A }.count + 1
                place.column = index - (head[..<index].lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
                throw BundleError(.forbiddenConstruct,
                    message: "a DOCTYPE (DTD) is not allowed in a bundle: it is where external entities and entity expansion live")
                    .located(place)
            } else {
                return  // the root element: the prolog is over
            }
        }
        if head.count == maximumBytes {
            throw BundleError(.limitExceeded, message: "the prolog before the root element is longer than \(maximumBytes) bytes")
                .located(location)
        }
    }
}
