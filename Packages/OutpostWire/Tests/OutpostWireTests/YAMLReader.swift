import Foundation

/// A reader for the block-style YAML subset `schemas/sync-api.yaml` is written in: mappings,
/// sequences, plain or quoted scalars and `|` block scalars. Purpose-built, so the schema check
/// needs no YAML package; anything outside the subset is a test failure, not a silent misread.
indirect enum YAMLNode: Equatable {
    case scalar(String)
    case mapping([(key: String, value: YAMLNode)])
    case sequence([YAMLNode])

    static func == (lhs: YAMLNode, rhs: YAMLNode) -> Bool {
        switch (lhs, rhs) {
        case (.scalar(let a), .scalar(let b)): a == b
        case (.sequence(let a), .sequence(let b)): a == b
        case (.mapping(let a), .mapping(let b)): a.elementsEqual(b) { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    subscript(key: String) -> YAMLNode? {
        guard case .mapping(let pairs) = self else { return nil }
        return pairs.first { $0.key == key }?.value
    }

    var keys: [String] {
        guard case .mapping(let pairs) = self else { return [] }
        return pairs.map(\.key)
    }

    var scalars: [String] {
        guard case .sequence(let items) = self else { return [] }
        return items.compactMap { if case .scalar(let text) = $0 { text } else { nil } }
    }

    var text: String? {
        if case .scalar(let text) = self { return text }
        return nil
    }
}

struct YAMLReader {
    struct SyntaxError: Error, CustomStringConvertible {
        var line: Int
        var problem: String
        var description: String { "line \(line): \(problem)" }
    }

    private struct Line {
        var number: Int
        var indent: Int
        var text: String
    }

    private var lines: [Line] = []
    private var position = 0

    static func parse(_ source: String) throws(SyntaxError) -> YAMLNode {
        var reader = YAMLReader()
        for (index, raw) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = raw.drop { $0 == " " }
            if text.isEmpty || text.hasPrefix("#") { continue }
            if text.hasPrefix("\t") { throw SyntaxError(line: index + 1, problem: "tab indentation") }
            reader.lines.append(Line(number: index + 1, indent: raw.count - text.count, text: String(text)))
        }
        guard let first = reader.lines.first else { return .mapping([]) }
        let root = try reader.block(indent: first.indent)
        if reader.position < reader.lines.count {
            throw SyntaxError(line: reader.lines[reader.position].number, problem: "unexpected indentation")
        }
        return root
    }

    private mutating func block(indent: Int) throws(SyntaxError) -> YAMLNode {
        lines[position].text.hasPrefix("-") ? try sequence(indent: indent) : try mapping(indent: indent)
    }

    private mutating func mapping(indent: Int) throws(SyntaxError) -> YAMLNode {
        var pairs: [(key: String, value: YAMLNode)] = []
        while position < lines.count, lines[position].indent == indent, !lines[position].text.hasPrefix("- ") {
            let line = lines[position]
            position += 1
            let key: String
            let rest: String
            if let separator = line.text.range(of: ": ") {
                key = Self.unquote(String(line.text[..<separator.lowerBound]))
                rest = String(line.text[separator.upperBound...]).trimmingCharacters(in: .whitespaces)
            } else if line.text.hasSuffix(":") {
                key = Self.unquote(String(line.text.dropLast()))
                rest = ""
            } else {
                throw SyntaxError(line: line.number, problem: "expected 'key: value'")
            }
            if pairs.contains(where: { $0.key == key }) {
                throw SyntaxError(line: line.number, problem: "duplicate key '\(key)'")
            }
            pairs.append((key, try value(after: rest, indent: indent)))
        }
        return .mapping(pairs)
    }

    private mutating func value(after rest: String, indent: Int) throws(SyntaxError) -> YAMLNode {
        if rest == "|" || rest == ">" {
            var text: [String] = []
            while position < lines.count, lines[position].indent > indent {
                text.append(lines[position].text)
                position += 1
            }
            return .scalar(text.joined(separator: rest == "|" ? "\n" : " "))
        }
        if rest == "[]" { return .sequence([]) }
        if rest == "{}" { return .mapping([]) }
        if !rest.isEmpty {
            if rest.hasPrefix("[") || rest.hasPrefix("{") {
                throw SyntaxError(line: lines[position - 1].number, problem: "flow collections are outside the subset")
            }
            return .scalar(Self.unquote(rest))
        }
        guard position < lines.count else { return .scalar("") }
        let next = lines[position]
        if next.indent > indent { return try block(indent: next.indent) }
        if next.indent == indent, next.text.hasPrefix("- ") { return try sequence(indent: indent) }
        return .scalar("")
    }

    private mutating func sequence(indent: Int) throws(SyntaxError) -> YAMLNode {
        var items: [YAMLNode] = []
        while position < lines.count, lines[position].indent == indent, lines[position].text.hasPrefix("- ") {
            let item = String(lines[position].text.dropFirst(2))
            if item.contains(": ") || item.hasSuffix(":") {
                // "- key: value" opens a mapping whose keys sit two columns further in.
                lines[position] = Line(number: lines[position].number, indent: indent + 2, text: item)
                items.append(try mapping(indent: indent + 2))
            } else {
                position += 1
                items.append(.scalar(Self.unquote(item)))
            }
        }
        return .sequence(items)
    }

    private static func unquote(_ text: String) -> String {
        for quote in ["\"", "'"] where text.count >= 2 && text.hasPrefix(quote) && text.hasSuffix(quote) {
            let inner = String(text.dropFirst().dropLast())
            return quote == "\"" ? inner.replacingOccurrences(of: "\\\"", with: "\"") : inner
        }
        return text
    }
}
