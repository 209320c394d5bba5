import Foundation
import OutpostConflicts
import OutpostModels
import Testing
@testable import OutpostStore

/// The queue payload and the field clocks are written in compact forms (one clock for all fields, clocks
/// grouped); rows written by earlier versions, with a clock per field, must read back the same.
@Suite struct StoredFormsTests {
    let early = try! HybridTimestamp(encoded: "0194f3a2b1c0-0000-00000000000000a1")
    let late = try! HybridTimestamp(encoded: "0194f3a2b1c1-0002-00000000000000a1")

    @Test func aPayloadWithOneClockForAllFieldsStoresItOnce() throws {
        let payload = MutationQueue.Payload(
            fields: ["title": .text("Leak"), "status": .text("open")], clocks: ["title": early, "status": early], deletion: nil)
        let text = try payload.encoded()
        #expect(text == #"{"clock":"0194f3a2b1c0-0000-00000000000000a1","fields":{"status":{"text":"open"},"title":{"text":"Leak"}}}"#)
        let decoded = try MutationQueue.decoder.decode(MutationQueue.Payload.self, from: Data(text.utf8))
        #expect(decoded.fields == payload.fields && decoded.clocks == payload.clocks && decoded.deletion == nil)
    }

    @Test func aPayloadWithClocksPerFieldReadsAsBefore() throws {
        // What earlier versions wrote, and what a folded edit with two clocks still writes.
        let payload = MutationQueue.Payload(
            fields: ["title": .text("Leak"), "status": .text("open")], clocks: ["title": late, "status": early], deletion: late)
        let text = try payload.encoded()
        #expect(text.hasPrefix(#"{"clocks":{"#))
        let old = #"{"clocks":{"status":"0194f3a2b1c0-0000-00000000000000a1","title":"0194f3a2b1c1-0002-00000000000000a1"},"deletion":"0194f3a2b1c1-0002-00000000000000a1","fields":{"status":{"text":"open"},"title":{"text":"Leak"}}}"#
        #expect(text == old)
        let decoded = try MutationQueue.decoder.decode(MutationQueue.Payload.self, from: Data(old.utf8))
        #expect(decoded.fields == payload.fields && decoded.clocks == payload.clocks && decoded.deletion == late)
    }

    @Test func fieldClocksAreGroupedAndOldRowsReadTheSame() throws {
        let stored = FieldClocks.Stored(
            fields: ["title": late, "status": early, "details": early], deletion: nil, server: ["title": early])
        let text = try stored.encoded()
        #expect(text == #"{"byClock":{"0194f3a2b1c0-0000-00000000000000a1":["details","status"],"0194f3a2b1c1-0002-00000000000000a1":["title"]},"serverByClock":{"0194f3a2b1c0-0000-00000000000000a1":["title"]}}"#)
        let decoded = try MutationQueue.decoder.decode(FieldClocks.Stored.self, from: Data(text.utf8))
        #expect(decoded.fields == stored.fields && decoded.server == stored.server && decoded.deletion == nil)

        // After a plain pull the server's clocks are the local ones: stored as a flag, read back whole.
        let pulled = FieldClocks.Stored(fields: stored.fields, deletion: late, server: stored.fields)
        let pulledText = try pulled.encoded()
        #expect(pulledText.hasSuffix(#"]},"serverAsFields":true}"#))
        let pulledBack = try MutationQueue.decoder.decode(FieldClocks.Stored.self, from: Data(pulledText.utf8))
        #expect(pulledBack.fields == stored.fields && pulledBack.server == stored.fields && pulledBack.deletion == late)
        let none = try MutationQueue.decoder.decode(
            FieldClocks.Stored.self, from: Data(try FieldClocks.Stored(fields: [:], deletion: nil, server: nil).encoded().utf8))
        #expect(none.fields.isEmpty && none.server == nil)

        let old = #"{"fields":{"details":"0194f3a2b1c0-0000-00000000000000a1","status":"0194f3a2b1c0-0000-00000000000000a1","title":"0194f3a2b1c1-0002-00000000000000a1"},"server":{"title":"0194f3a2b1c0-0000-00000000000000a1"}}"#
        let fromOld = try MutationQueue.decoder.decode(FieldClocks.Stored.self, from: Data(old.utf8))
        #expect(fromOld.fields == stored.fields && fromOld.server == stored.server)
    }
}
