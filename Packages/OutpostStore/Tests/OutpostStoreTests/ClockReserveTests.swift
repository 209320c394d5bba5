@testable import OutpostStore
import Foundation
import GRDB
import OutpostConflicts
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// The clock's saved value runs a little ahead of its newest stamp, so a restart resumes after every
/// stamp without a write of the clock in every transaction. An app's widget, its share extension and
/// the CLI each open the file, write once and quit: each resumed from the reserve, so a reserve of a
/// second moved the device's clock a second ahead per process, 300 s after 330 of them, and its edits
/// then beat later ones by other devices.
@Suite(.fieldService) struct ClockReserveTests {
    @Test func shortLivedWritersOneAfterAnotherKeepTheDevicesClockNearItsWallClock() async throws {
        let folder = try TemporaryDatabase()
        for index in 0..<20 {
            let store = try LocalStore.open(at: folder.path)
            _ = try await store.save(Issue(projectID: UUID(), title: "Widget write \(index)"))
        }
        let saved = try #require(try await folder.queue.read { db in
            try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = 'clock_last'")
        })
        let ahead = try HybridTimestamp(encoded: saved).physicalMilliseconds - Int64(Date().timeIntervalSince1970 * 1000)
        #expect(ahead < 1_000, "20 writers left the device's clock \(ahead) ms ahead of its wall clock")
    }
}
