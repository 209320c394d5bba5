import Foundation

/// Counts the attributes of each start tag as the document's bytes go by, before libxml2 parses them.
///
/// Why: libxml2 2.9 checks each attribute of a start tag against every one before it (duplicates), and
/// each namespace declaration against every one before it, so one element's attributes cost quadratic
/// time inside the parser, before any callback of ours runs: an element of 80,000 attributes (0.9 MB)
/// took `outpost import` 1.3 s, one of 300,000 (3.3 MB) 17.6 s (attack 129, F3 and F4). No element the
/// bundle format declares has more than six (the schema also lets namespace declarations and `xsi:`
/// attributes stand anywhere), so a tag with more than `BundleLimits.maximumObjectMembers`, all of
/// them counted, is refused before the parser sees it.
///
/// An attribute (namespace declarations included) is the one `=` of its `Eq` outside quotes, in a start
/// tag: text never holds a raw `<` and an attribute value never holds one either, so for a well-formed
/// document this count is exact. Comments, CDATA sections, processing instructions and end tags are
/// skipped; the text between tags is skipped with `memchr`. Its cost: 0.9% of `outpost-bench
/// bundle-import`'s samples (`perf`), lines counted included, about 2% of the XML imports' time.
struct XMLAttributeCount {
    /// The most attributes a start tag may have.
    let limit: Int
    private var state = State.text
    /// The line the scan has reached, from 1; once a tag is refused, the line of its `<`.
    private(set) var line = 1
    /// The line of the `<` of a tag that began in bytes scanned before and goes on.
    private var openTagLine = 1

    private enum State {
        case text
        /// Just after `<`.
        case open
        case startTag(attributes: Int, quote: UInt8?)
        case endTag
        /// `<?…?>`; whether the last byte was `?`.
        case instruction(afterQuestionMark: Bool)
        /// After `<!`: how much of `--` or `[CDATA[` has matched.
        case bang(matched: Int, cdata: Bool)
        /// `<!--…-->`; how many `-` came last.
        case comment(dashes: Int)
        /// `<![CDATA[…]]>`; how many `]` came last.
        case cdata(brackets: Int)
        /// Any other `<!…>`, which no bundle holds (libxml2 refuses it): skipped to its `>`.
        case declaration
    }

    private static let cdataOpening = Array("[CDATA[".utf8)

    init(limit: Int) {
        self.limit = limit
    }

    /// What a scan found.
    enum Verdict: Equatable {
        /// Every start tag so far is within the limit.
        case within
        /// A start tag has more attributes than the limit: its `<` is at `tagStart` in the bytes just
        /// scanned, or nil when it began in bytes scanned before. The bytes after it are not scanned.
        case pastTheLimit(tagStart: Int?)
    }

    /// Scans the next bytes of the document.
    mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Verdict {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return .within }
        let count = bytes.count
        let firstLine = line
        var lastOpen: Int?
        guard firstPastTheLimit(base, count, lastOpen: &lastOpen) != nil else {
            line += Self.newlines(base, count)
            switch state {
            case .open, .startTag:
                if let lastOpen { openTagLine = firstLine + Self.newlines(base, lastOpen) }
            default:
                break
            }
            return .within
        }
        line = lastOpen.map { firstLine + Self.newlines(base, $0) } ?? openTagLine
        return .pastTheLimit(tagStart: lastOpen)
    }

    /// The offset of the `=` that takes a start tag past the limit, or nil; `lastOpen` is the offset
    /// of the last `<` in these bytes. Lines are counted apart (`newlines`), so this loop only follows
    /// the markup.
    private mutating func firstPastTheLimit(_ base: UnsafePointer<UInt8>, _ count: Int, lastOpen: inout Int?) -> Int? {
        var index = 0
        /// The offset of the next `byte` from `index`, or nil when the chunk holds none.
        func next(_ byte: UInt8) -> Int? {
            guard index < count, let found = memchr(base + index, Int32(byte), count - index) else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
        while index < count {
            switch state {
            case .text:
                // Text is most of a document: the next tag is found without looking at each byte in Swift.
                guard let tag = next(0x3C) else { return nil }
                state = .open
                lastOpen = tag
                index = tag + 1
            case .endTag, .declaration:
                guard let end = next(0x3E) else { return nil }
                state = .text
                index = end + 1
            case .startTag(var attributes, var quote):
                while index < count {
                    if let open = quote {
                        guard let close = next(open) else {
                            state = .startTag(attributes: attributes, quote: open)
                            return nil
                        }
                        quote = nil
                        index = close + 1
                        continue
                    }
                    let byte = base[index]
                    if byte == 0x22 || byte == 0x27 {
                        quote = byte
                    } else if byte == 0x3D {
                        guard attributes < limit else { return index }
                        attributes += 1
                    } else if byte == 0x3E {
                        break
                    }
                    index += 1
                }
                if index < count {
                    state = .text  // at the tag's `>`
                    index += 1
                } else {
                    state = .startTag(attributes: attributes, quote: quote)
                }
            default:
                step(base[index])
                index += 1
            }
        }
        return nil
    }

    /// One byte of the short spans: just after `<`, and inside comments, CDATA sections and
    /// processing instructions.
    private mutating func step(_ byte: UInt8) {
        switch state {
        case .open:
            switch byte {
            case 0x2F: state = .endTag  // </
            case 0x3F: state = .instruction(afterQuestionMark: false)  // <?
            case 0x21: state = .bang(matched: 0, cdata: false)  // <!
            case 0x3E: state = .text  // <> (not well-formed; libxml2 says so)
            default: state = .startTag(attributes: 0, quote: nil)
            }
        case .instruction(let afterQuestionMark):
            state = byte == 0x3E && afterQuestionMark ? .text : .instruction(afterQuestionMark: byte == 0x3F)
        case .bang(let matched, let cdata):
            if matched == 0 {
                state = byte == 0x2D ? .bang(matched: 1, cdata: false)
                    : byte == 0x5B ? .bang(matched: 1, cdata: true) : byte == 0x3E ? .text : .declaration
            } else if !cdata {
                state = byte == 0x2D ? .comment(dashes: 0) : byte == 0x3E ? .text : .declaration
            } else if byte == Self.cdataOpening[matched] {
                state = matched + 1 == Self.cdataOpening.count ? .cdata(brackets: 0) : .bang(matched: matched + 1, cdata: true)
            } else {
                state = byte == 0x3E ? .text : .declaration
            }
        case .comment(let dashes):
            state = byte == 0x3E && dashes >= 2 ? .text : .comment(dashes: byte == 0x2D ? dashes + 1 : 0)
        case .cdata(let brackets):
            state = byte == 0x3E && brackets >= 2 ? .text : .cdata(brackets: byte == 0x5D ? brackets + 1 : 0)
        case .text, .startTag, .endTag, .declaration:
            break  // followed in `firstPastTheLimit`
        }
    }

    /// The line feeds among `count` bytes, eight at a time: a byte-by-byte loop over every chunk cost
    /// as much as following the markup (`perf`, `outpost-bench bundle-import`).
    static func newlines(_ start: UnsafePointer<UInt8>, _ count: Int) -> Int {
        let raw = UnsafeRawPointer(start)
        let low: UInt64 = 0x7F7F_7F7F_7F7F_7F7F, feeds: UInt64 = 0x0A0A_0A0A_0A0A_0A0A
        var lines = 0, offset = 0
        while offset + 8 <= count {
            // A byte of `word` is zero exactly where the chunk holds a line feed; each such byte's high
            // bit is set in `zero` (no carry crosses bytes: each byte's sum stays within it). Those bits,
            // moved to each byte's lowest, are summed into the top byte by one multiplication (the
            // baseline x86-64 target has no population count instruction).
            let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ feeds
            let zero = ~(((word & low) &+ low) | word | low)
            lines += Int(((zero >> 7) &* 0x0101_0101_0101_0101) >> 56)
            offset += 8
        }
        while offset < count {
            if start[offset] == 0x0A { lines += 1 }
            offset += 1
        }
        return lines
    }
}
