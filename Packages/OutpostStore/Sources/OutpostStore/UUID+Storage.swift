import Foundation

extension UUID {
    /// Parses the stored form (36 characters of hex and dashes) without `UUID(uuidString:)`'s sscanf,
    /// which was the largest single cost of listing records. Falls back for anything unusual.
    init?(storageText text: String) {
        var parsed: UUID?
        var text = text
        text.withUTF8 { bytes in
            guard bytes.count == 36, bytes[8] == 0x2D, bytes[13] == 0x2D, bytes[18] == 0x2D, bytes[23] == 0x2D else {
                return
            }
            var raw = [UInt8](repeating: 0, count: 16)
            var out = 0
            var index = 0
            while index < 36 {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    index += 1
                    continue
                }
                guard let high = Self.nibble(bytes[index]), let low = Self.nibble(bytes[index + 1]) else { return }
                raw[out] = high << 4 | low
                out += 1
                index += 2
            }
            parsed = UUID(uuid: (
                raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
        guard let parsed else { return nil }
        self = parsed
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x61...0x66: byte - 0x61 + 10
        case 0x41...0x46: byte - 0x41 + 10
        default: nil
        }
    }
}

extension UUID {
    /// A random (version 4) UUID from the system generator. `UUID()` on Linux opens /dev/urandom on
    /// every call, a file open per queued mutation; `getrandom` needs none.
    static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * index))
            bytes[index + 8] = UInt8(truncatingIfNeeded: low >> (8 * index))
        }
        bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80  // RFC 4122 variant
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}
