@testable import OutpostServer
import Foundation
import Outpost
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostStore
import Testing

/// A pre-sync's download takes no more of the device's disk than a pull does, and what a pre-sync
/// killed midway left is removed by the next (attack 68, findings 1 and 5).
@Suite("A pre-sync keeps the room the store keeps free and clears what a killed one left", .fieldService)
struct PreSyncRoomTests {
    @Test func aPreSyncShortOfRoomDownloadsNothingAndImportsNothing() async throws {
        let server = try await TestServer.start(.sqlite)
        _ = try await NothingTwiceTests.alicesIssues(5, on: server)
        let path = server.directory.appendingPathComponent("alice-full-\(UUID().uuidString).sqlite").path
        // More room kept free than any volume has: the device is short of room.
        let transport = server.transport(token: TestServer.aliceToken)
        let device = try Device(path: path, app: .fieldService, transport: transport, keepingFree: Int64.max / 2)
        await #expect {
            try await device.preSync(project: TestServer.projectA)
        } throws: { error in
            guard case .store(let cause) = error as? OutpostError else { return false }
            return cause.code == .storageFull
        }
        #expect(try NothingTwiceTests.issues(on: device).isEmpty)
        #expect(await transport.transferred.bytesReceived == 0, "the bundle was downloaded")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: device.store.scratchFolder.path)) ?? []
        #expect(left.isEmpty, "\(left)")
    }

    @Test func aPreSyncRemovesWhatAKilledOneLeft() async throws {
        let server = try await TestServer.start(.sqlite)
        _ = try await NothingTwiceTests.alicesIssues(5, on: server)
        let device = try NothingTwiceTests.device("alice-leftovers", on: server)
        // A bundle a pre-sync of a process that is gone was downloading when it was killed.
        try FileManager.default.createDirectory(at: device.store.scratchFolder, withIntermediateDirectories: true)
        let leftover = device.store.scratchFolder.appendingPathComponent("4194303-\(UUID().uuidString.lowercased()).json")
        try Data(repeating: 0x20, count: 1 << 20).write(to: leftover)
        let summary = try await device.preSync(project: TestServer.projectA)
        #expect(summary.total.inserted > 5)
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
    }
}
