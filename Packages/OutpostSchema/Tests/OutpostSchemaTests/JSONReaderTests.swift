import Foundation
@testable import OutpostSchema
import OutpostTesting
import Testing

@Suite struct JSONReaderTests {
    private func read<T>(_ text: String, _ body: (inout JSONReader) throws(JSONReaderError) -> T) throws(JSONReaderError) -> T {
        var reader = JSONReader(Data(text.utf8))
        let value = try body(&reader)
        try reader.expectEnd()
        return value
    }

    @Test func walksNestedObjectsAndArraysAndSkipsWhatItIsNotAskedFor() throws {
        let text = #" { "a" : [1, 2 ,3], "skip": {"x": [true, false, null, "s\"", -1.5e3, {}]}, "b": "\u00e9\ud83d\ude00\n" } "#
        let (numbers, b) = try read(text) { (reader: inout JSONReader) throws(JSONReaderError) -> ([Int64], String) in
            var numbers: [Int64] = [], b = ""
            try reader.beginObject()
            while let key = try reader.nextKey() {
                switch key {
                case "a":
                    try reader.beginArray()
                    while try reader.nextElement() { numbers.append(try reader.integer()) }
                case "b": b = try reader.string()
                default: try reader.skipValue()
                }
            }
            return (numbers, b)
        }
        #expect(numbers == [1, 2, 3])
        #expect(b == "é😀\n")
    }

    /// Plain ASCII comes back as bytes; anything else is left unconsumed for `string()`, which reads it
    /// the same way it would have. A UUID reads in either case, escaped or not.
    @Test func plainASCIIStringsAreReadInPlaceAndOthersAreLeftForString() throws {
        let texts = try read(#"["0194f3a2b1c0-0000-00000000000000a1", "caf\u00e9", "café", "a\"b", ""]"#) {
            (reader: inout JSONReader) throws(JSONReaderError) -> [String] in
            var texts: [String] = []
            try reader.beginArray()
            while try reader.nextElement() {
                if let bytes = try reader.plainASCIIString() {
                    texts.append("plain:" + String(decoding: bytes, as: UTF8.self))
                } else {
                    texts.append("string:" + (try reader.string()))
                }
            }
            return texts
        }
        #expect(texts == ["plain:0194f3a2b1c0-0000-00000000000000a1", "string:café", "string:café", "string:a\"b", "plain:"])
        let id = UUID()
        let ids = try read(#"["\#(id.uuidString)", "\#(id.uuidString.lowercased())", "\u0030\#(id.uuidString.dropFirst())"]"#) {
            (reader: inout JSONReader) throws(JSONReaderError) -> [UUID] in
            var ids: [UUID] = []
            try reader.beginArray()
            while try reader.nextElement() { ids.append(try reader.uuid()) }
            return ids
        }
        #expect(ids.prefix(2) == [id, id])
        #expect(ids[2] == UUID(uuidString: "0" + id.uuidString.dropFirst()))
        #expect(throws: JSONReaderError.self) { try read(#""not-a-uuid""#) { (reader: inout JSONReader) throws(JSONReaderError) in try reader.uuid() } }
        // An unterminated string or a raw control byte is left where it was, for `string()` to refuse.
        for text in [#""unterminated"#, "\"a\tb\""] {
            var plain = JSONReader(Data(text.utf8))
            #expect(try plain.plainASCIIString() == nil)
            let afterPlain = #expect(throws: JSONReaderError.self) { try plain.string() }
            var direct = JSONReader(Data(text.utf8))
            let alone = #expect(throws: JSONReaderError.self) { try direct.string() }
            #expect(afterPlain?.description == alone?.description, "the same error at the same place")
        }
    }

    @Test func readsFieldValuesInTheirOneKeyForm() throws {
        let values: [FieldValue] = [
            .null, .bool(false), .integer(Int64.min), .integer(Int64.max), .real(-0.25), .real(1e300), .text("tab\there \"q\" \\ ü"),
            .date(Date(timeIntervalSince1970: 1_770_000_000.123)), .uuid(UUID()), .blob(Data([0, 1, 254, 255])),
        ]
        for value in values {
            var writer = JSONWriter()
            try writer.value(value)
            #expect(try read(writer.text) { (reader: inout JSONReader) throws(JSONReaderError) in try reader.fieldValue() } == value)
        }
    }

    @Test(arguments: [
        (#"{"a":1,}"#, "a trailing comma"),
        (#"[1 2]"#, "expected ',' or ']'"),
        (#"{"a" 1}"#, "expected ':'"),
        (#"01"#, "leading zero"),
        (#"1."#, "without digits after '.'"),
        (#""a\qb""#, "unknown escape"),
        (#""\ud800x""#, "high surrogate"),
        ("\"tab\tinside\"", "control character"),
        (#"99999999999999999999"#, "out of the 64-bit range"),
        (#"1.5"#, "expected an integer"),
        (#"1e300"#, "64-bit"),
        // Attack 100, F1: read through a `Double`, these became 5 and 2^53, a value the sender never wrote.
        (#"4.9999999999999999"#, "expected an integer"),
        (#"9007199254740993.5"#, "expected an integer"),
        (#"1e-1"#, "expected an integer"),
        (#"1e19"#, "64-bit"),
        (#"9223372036854775808.0"#, "64-bit"),
        (#"{"text":"a","integer":1}"#, "more than one key"),
        (#"{"when":"a"}"#, "not a field value kind"),
        (#"{"date":"yesterday"}"#, "not an ISO 8601 timestamp"),
        (#"[1] x"#, "after the document"),
        (#""open"#, "unterminated"),
    ])
    func refusesWhatIsNotStrictJSON(text: String, problem: String) {
        do {
            try read(text) { (reader: inout JSONReader) throws(JSONReaderError) in
                // Field values and integers are read as such; everything else only has to be JSON.
                if text.hasPrefix("{\"") && !text.hasPrefix("{\"a") {
                    _ = try reader.fieldValue()
                } else if problem.contains("64-bit") || problem.contains("integer") {
                    _ = try reader.integer()
                } else {
                    try reader.skipValue()
                }
            }
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.message.contains(problem), "\(error)")
        }
    }

    /// `string()` stops at the byte that ends its fast pass: a raw control byte is named where it is,
    /// an unterminated string at the end, and text around an escape or outside ASCII reads whole.
    @Test func stringsReadWholeOrFailWhereTheyStop() throws {
        var control = JSONReader(Data("\"ab\u{1}c\"".utf8))
        #expect(throws: JSONReaderError(message: "a control character in a string", offset: 3, line: 1, column: 4)) {
            _ = try control.string()
        }
        var open = JSONReader(Data(#""open"#.utf8))
        #expect(throws: JSONReaderError(message: "an unterminated string", offset: 5, line: 1, column: 6)) {
            _ = try open.string()
        }
        var mixed = JSONReader(Data(#"["plain","ñandú","a\"b","ç\n"]"#.utf8))
        var read: [String] = []
        try mixed.beginArray()
        while try mixed.nextElement() { read.append(try mixed.string()) }
        try mixed.expectEnd()
        #expect(read == ["plain", "ñandú", "a\"b", "ç\n"])
    }

    @Test func refusesInvalidUTF8AndDeepNestingWithAPosition() {
        var reader = JSONReader(Data([0x0A, 0x22, 0x61, 0xC3, 0x28, 0x22]))
        #expect(throws: JSONReaderError(message: "a string that is not valid UTF-8", offset: 2, line: 2, column: 2)) {
            _ = try reader.string()
        }
        var deep = JSONReader(Data((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8))
        #expect(throws: JSONReaderError.self) { try deep.skipValue() }
        var fine = JSONReader(Data((String(repeating: "[", count: 64) + String(repeating: "]", count: 64)).utf8))
        #expect(throws: Never.self) { try fine.skipValue() }
    }

    @Test func wholeNumbersWithAFractionOrExponentAreIntegersAsJSONDecoderReadsThem() throws {
        for (text, value) in [("5.0", Int64(5)), ("1e3", 1_000), ("-2.00", -2), ("9007199254740992.0", 9_007_199_254_740_992)] {
            var reader = JSONReader(Data(text.utf8))
            #expect(try reader.integer() == value, "\(text)")
            #expect(try JSONDecoder().decode(Int64.self, from: Data(text.utf8)) == value, "\(text)")
        }
    }

    /// Attack 100, F1: a whole number with a fraction or an exponent was read through a `Double`, so a
    /// value past 2^53 was stored rounded (9007199254740993.0 as 9007199254740992). It is read exactly.
    @Test func wholeNumbersWithAFractionOrExponentAreReadExactly() throws {
        let cases: [(String, Int64)] = [
            ("9007199254740993.0", 9_007_199_254_740_993), ("9223372036854775807.0", .max), ("-9223372036854775808.0", .min),
            ("12.50e1", 125), ("100e-2", 1), ("-0.0", 0), ("0e999999", 0), ("1e18", 1_000_000_000_000_000_000),
            ("123456789012345678.9e1", 1_234_567_890_123_456_789), ("0.000e5", 0), ("0.0001e4", 1),
        ]
        for (text, value) in cases {
            var reader = JSONReader(Data(text.utf8))
            #expect(try reader.integer() == value, "\(text)")
        }
        // A megabyte of a fraction's zeros is read in one pass (one digit dropped at a time, it was quadratic).
        var long = JSONReader(Data(("0." + String(repeating: "0", count: 1_000_000) + "1").utf8))
        #expect(throws: JSONReaderError.self) { _ = try long.integer() }
    }

    @Test func aRepeatedFieldNameIsRefused() {
        var reader = JSONReader(Data(#"{"a":null,"a":{"integer":1}}"#.utf8))
        #expect(throws: JSONReaderError.self) { _ = try reader.fields() }
    }
}

/// The hand-written timestamp form must agree with Foundation's ISO 8601 style on every instant where
/// their calendars agree, and refuse every text that names no real instant (seeded: a failure names its
/// seed).
@Suite struct TimestampFastPathTests {
    @Test func formatsAndParsesAsFoundationDoesAcrossTheCalendar() throws {
        var random = SeededGenerator(seed: 2026)
        let first: Int64 = -11_676_096_000_000, last: Int64 = 253_402_300_799_999  // 1600-01-01 … 9999-12-31
        let edges: [Int64] = [first, last, 0, -1, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, -2_203_891_200_001]
        for milliseconds in edges + (0..<20_000).map({ _ in Int64.random(in: first...last, using: &random) }) {
            let text = try #require(Timestamp.fastString(milliseconds: milliseconds))
            #expect(text == Timestamp.formattedString(milliseconds: milliseconds), "\(milliseconds)")
            #expect(Timestamp.milliseconds(fromText: text) == milliseconds, "\(text)")
        }
        // Beyond year 9999 Foundation writes it.
        #expect(Timestamp.fastString(milliseconds: last + 1) == nil)
    }

    /// A date before the Gregorian reform used to be read in the proleptic calendar and written in the
    /// Julian one, so every export and import moved it ten days (an attack on the bundle import found it).
    @Test func everyInstantFromYearZeroRoundTripsThroughItsText() throws {
        var random = SeededGenerator(seed: 1582)
        let first: Int64 = -62_167_219_200_000, last: Int64 = 253_402_300_799_999  // 0000-01-01 … 9999-12-31
        for milliseconds in [first, last, -12_219_292_800_001] + (0..<20_000).map({ _ in Int64.random(in: first...last, using: &random) }) {
            let text = Timestamp.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            #expect(Timestamp.milliseconds(fromText: text) == milliseconds, "\(text)")
        }
        #expect(Timestamp.string(from: try #require(Timestamp.date(from: "1500-06-01T00:00:00.000Z"))) == "1500-06-01T00:00:00.000Z")
        #expect(Timestamp.string(from: try #require(Timestamp.date(from: "0001-01-01T00:00:00Z"))) == "0001-01-01T00:00:00.000Z")
    }

    @Test func aTextNamingNoRealInstantIsRefusedNotMoved() {
        for refused in [
            "2026-02-29T00:00:00.000Z", "2026-02-30T11:06:40.125Z", "2026-13-01T00:00:00.000Z", "2026-00-10T00:00:00.000Z",
            "2026-01-01T24:00:00.000Z", "2026-11-18T25:06:40.125Z", "2026-11-18T11:60:00.000Z", "2016-12-31T23:59:60Z",
            "2026-11-18T11:06:40.Z", "2026-11-18T11:06:40.1234567890Z", "2026-11-18T11:06:40.125", "2026-11-18 11:06:40.125Z",
        ] {
            #expect(Timestamp.date(from: refused) == nil, "\(refused)")
        }
        #expect(Timestamp.date(from: "2024-02-29T00:00:00Z") != nil)
        #expect(Timestamp.date(from: "2026-11-18T11:06:40.123456789Z") == Timestamp.date(from: "2026-11-18T11:06:40.123Z"))
        #expect(Timestamp.date(from: "2026-11-18T11:06:40.9996Z") == Timestamp.date(from: "2026-11-18T11:06:41.000Z"))
        #expect(Timestamp.date(from: "2026-11-18T11:06:40.5Z") == Timestamp.date(from: "2026-11-18T11:06:40.500Z"))
        // Rounding up to the millisecond must not leave the years a text can name (attack 123, finding 1:
        // imported as 10000-01-01, then exported as a bundle no import takes).
        #expect(Timestamp.date(from: "9999-12-31T23:59:59.9995Z") == nil)
        #expect(Timestamp.date(from: "9999-12-31T23:59:59.9994Z") == Timestamp.date(from: "9999-12-31T23:59:59.999Z"))
    }

    /// Every instant a text is read as can be written and read back as itself: what is imported can be
    /// exported, and what is exported imported. Seeded texts of one to nine fraction digits, many at the
    /// edges of the years a text can name.
    @Test func everyInstantReadFromATextIsWrittenAsOneThatReadsBackTheSame() throws {
        var random = SeededGenerator(seed: 10_000)
        let digits = Array("0123456789")
        var read = 0
        for round in 0..<20_000 {
            let year = [0, 9999, Int.random(in: 0...9999, using: &random)][round % 3]
            let month = round % 3 == 1 ? 12 : Int.random(in: 1...12, using: &random)
            let day = round % 3 == 1 ? 31 : Int.random(in: 1...28, using: &random)
            let time = round % 3 == 1 ? "23:59:59" : String(format: "%02d:%02d:%02d", Int.random(in: 0...23, using: &random),
                Int.random(in: 0...59, using: &random), Int.random(in: 0...59, using: &random))
            let fraction = String((0..<Int.random(in: 1...9, using: &random)).map { _ in
                round % 3 == 1 && Bool.random(using: &random) ? "9" : digits.randomElement(using: &random)!
            })
            let text = String(format: "%04d-%02d-%02dT", year, month, day) + time + "." + fraction + "Z"
            guard let date = Timestamp.date(from: text) else { continue }
            read += 1
            let written = Timestamp.string(from: date)
            #expect(Timestamp.date(from: written) == date, "\(text) → \(written)")
            #expect(written.utf8.count == 24, "\(text) → \(written)")
        }
        #expect(read > 19_000)
    }
}
