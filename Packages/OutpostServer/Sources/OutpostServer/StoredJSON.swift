import Foundation
import OutpostConflicts
import OutpostSchema
import OutpostWire

/// A mutation's outcome as stored for its idempotency key: the wire's JSON, so a repeat is answered
/// with exactly the original.
enum OutcomeJSON {
    static func encode(_ outcome: MutationOutcome) throws(ServerError) -> String {
        // The common answers by hand, as `JSONEncoder` would write them (keys sorted).
        switch outcome {
        case .applied(let version, let serverID):
            var json = JSONWriter(capacity: 64)
            if let serverID {
                json.raw(#"{"serverID":"#)
                json.string(serverID)
                json.raw(#","status":"applied","version":"#)
            } else {
                json.raw(#"{"status":"applied","version":"#)
            }
            json.integer(version)
            json.raw("}")
            return json.text
        case .rejected(let reason):
            var json = JSONWriter(capacity: 128)
            json.raw(#"{"reason":{"code":"#)
            json.string(reason.code.rawValue)
            json.raw(#","message":"#)
            json.string(reason.message)
            json.raw(#"},"status":"rejected"}"#)
            return json.text
        case .duplicate(let original):
            let inner = try encode(original)
            return #"{"original":"# + inner + #","status":"duplicate"}"#
        case .conflict:
            break
        }
        do {
            return String(decoding: try WireCoding.encoder().encode(outcome), as: UTF8.self)
        } catch {
            throw ServerError(.databaseFailure, message: "an outcome could not be encoded: \(error)", underlying: error)
        }
    }

    static func decode(_ text: String) throws(ServerError) -> MutationOutcome {
        do {
            return try WireCoding.decoder().decode(MutationOutcome.self, from: Data(text.utf8))
        } catch {
            throw ServerError(.databaseFailure, message: "a stored outcome is unreadable: \(error)", underlying: error)
        }
    }
}

/// A push's answer, as `JSONEncoder` would write `PushResponse` (keys sorted: `idempotencyKey` comes
/// before every key of an outcome), from the outcomes' own JSON.
package enum PushResponseJSON {
    package static func encode(_ response: PushResponse) throws(ServerError) -> [UInt8] {
        let results = response.results
        var json = JSONWriter(capacity: 96 * results.count + 64)
        json.raw("{")
        if let checkpoint = response.checkpoint {
            json.raw(#""checkpoint":"#)
            json.string(checkpoint)
            json.raw(",")
        }
        if let keepsEveryAnswer = response.keepsEveryAnswer {
            json.raw(keepsEveryAnswer ? #""keepsEveryAnswer":true,"# : #""keepsEveryAnswer":false,"#)
        }
        json.raw(#""results":["#)
        for (index, result) in results.enumerated() {
            if index > 0 { json.raw(",") }
            json.raw(#"{"idempotencyKey":"#)
            json.string(result.idempotencyKey.uppercasedText)
            json.raw(",")
            // Before every member of an applied outcome ("serverID", "status", "version"), as sorted.
            if let sequence = result.sequence {
                json.raw(#""sequence":"#)
                json.integer(sequence)
                json.raw(",")
            }
            json.json(String(try OutcomeJSON.encode(result.outcome).dropFirst()))
        }
        json.raw("]}")
        return json.bytes
    }
}

/// The stored `fields` and `clocks` columns: the wire's one-key JSON, written without `JSONEncoder`.
enum StoredJSON {
    static func fields(_ fields: [String: FieldValue]) throws(ServerError) -> String {
        var json = JSONWriter(capacity: 64 * fields.count)
        do {
            try json.fields(fields)
        } catch {
            throw ServerError.badRequest(error.message, underlying: error)
        }
        return json.text
    }

    static func clocks(_ clocks: [String: HybridTimestamp]) -> String {
        var json = JSONWriter(capacity: 48 * clocks.count)
        json.object(clocks) { (json: inout JSONWriter, clock: HybridTimestamp) in json.string(clock.encoded) }
        return json.text
    }
}
