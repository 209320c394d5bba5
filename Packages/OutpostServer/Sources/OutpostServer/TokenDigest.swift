import Crypto
import Foundation

/// SHA-256 as lowercase hex. Bearer tokens are stored as their digest only, so a copy of the
/// database grants no access; media files are checked against theirs.
enum TokenDigest {
    static func hex(of token: String) -> String {
        hex(of: Data(token.utf8))
    }

    static func hex(of data: Data) -> String {
        SHA256.hash(data: data).hexText
    }
}

extension Sequence<UInt8> {
    /// The bytes as lowercase hex, two digits each: how the server writes every digest, key and seal.
    var hexText: String { map { String(format: "%02x", $0) }.joined() }
}
