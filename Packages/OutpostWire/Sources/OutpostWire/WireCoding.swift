import Foundation
import OutpostSchema

/// The JSON coders of the wire: instants as `Timestamp` text (ISO 8601 UTC with milliseconds), the
/// form records and bundles use, and keys sorted so answers are byte-stable. The one `Codable` setup
/// both ends use; the batches that dominate a sync are read by `WireReadable` instead.
public enum WireCoding {
    /// An encoder writing the wire's form.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.string(from: date))
        }
        return encoder
    }

    /// A decoder reading the wire's form; an instant that is not `Timestamp` text is refused.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = Timestamp.date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "'\(text)' is not an ISO 8601 UTC timestamp.")
            }
            return date
        }
        return decoder
    }
}
