import Crypto
import Foundation
import OutpostSchema
import OutpostWire

/// What a pushed change writes, as a digest kept beside its idempotency key: the key sent again with a
/// change that writes otherwise is refused instead of being answered as the first one's duplicate.
///
/// The digest covers every field's value and clock, and the delete's clock: what the change leaves in
/// the record. Not the base version (a device moves an unanswered change onto the version it pulled
/// since, and sends the same change again), nor create against update (a device whose create's answer
/// was lost, and whose pull then brought the record, sends it again as an update of it: the reliability
/// harness's devices were refused so), nor the server id (learned meanwhile) nor the creation time
/// (metadata the record keeps from its first create). A delete is told by its clock.
enum ChangeDigest {
    /// `mutation`'s digest, with `fields` its fields as the server reads them (parents named by client
    /// id): 16 bytes of SHA-256 over its canonical text (fields and clocks as the server stores them,
    /// keys sorted), as base64. Empty for fields no record could hold, which never match an applied
    /// change's.
    static func of(_ mutation: PushMutation, fields: [String: FieldValue]) -> String {
        guard let fields = try? StoredJSON.fields(fields) else { return "" }
        var text = fields
        text += "\n"
        text += StoredJSON.clocks(mutation.clocks)
        text += "\n"
        text += mutation.deletion?.encoded ?? "-"
        return Data(SHA256.hash(data: Data(text.utf8)).prefix(16)).base64EncodedString()
    }
}
