import Foundation

extension UUID {
    /// A version 7 UUID (RFC 9562): the Unix time in milliseconds in the first 48 bits, then random
    /// bits. Ids made one after another sort together, in their text form too, so a table or index
    /// keyed by them grows at its end: a local write or a pulled page then rewrites a few B-tree
    /// leaves instead of one random leaf per record and index (OutpostStore's README). New records and queued mutations get such ids; any UUID is still accepted.
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        var generator = SystemRandomNumberGenerator()
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded()))
        let random = (generator.next() as UInt64, generator.next() as UInt64)
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { out in
            for index in 0..<6 { out[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
            for index in 6..<16 {
                let source = index < 8 ? random.0 >> (8 * index) : random.1 >> (8 * (index - 8))
                out[index] = UInt8(truncatingIfNeeded: source)
            }
            out[6] = out[6] & 0x0F | 0x70  // version 7
            out[8] = out[8] & 0x3F | 0x80  // RFC 9562 variant
        }
        return UUID(uuid: bytes)
    }
}
