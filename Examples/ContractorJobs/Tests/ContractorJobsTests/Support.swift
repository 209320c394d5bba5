@testable import ContractorJobs
import Foundation
import Outpost
import OutpostServer

/// The app's own server on 127.0.0.1 (an ephemeral port), with integer server ids, in a temporary
/// folder removed when it stops; two users, each with a token.
final class JobsServer: Sendable {
    let folder: URL
    let server: SyncServer
    let url: URL
    let task: Task<Void, any Error>
    static let lead = UUID(), hand = UUID()

    init() async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("contractor-jobs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // The few lines a team writes for its server: its schema, a configuration.
        server = try SyncServer(
            serving: ContractorJobs.schema,
            configuration: ServerConfiguration(
                databasePath: folder.appendingPathComponent("server.sqlite").path, port: 0, assignsServerIDs: true,
                schemaVersions: 1...ContractorJobs.steps.count, logLevel: "critical", durableCommits: false))
        try await server.load(ServerSeed(
            members: [
                .init(userID: Self.lead, name: "Lena", role: "lead", projects: []),
                .init(userID: Self.hand, name: "Hugo", projects: []),
            ],
            tokens: [.init(userID: Self.lead, token: "lena-token"), .init(userID: Self.hand, token: "hugo-token")]))
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let server = self.server
        task = Task { try await server.run(handlingSignals: false) { continuation.yield($0) } }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        url = URL(string: "http://127.0.0.1:\(port)")!
    }

    /// A device of the app in its own folder, syncing with this server as the user of `token`.
    func device(_ name: String, token: String) throws -> Device {
        try Device(
            path: folder.appendingPathComponent("\(name).sqlite").path, app: ContractorJobs.app,
            server: Device.Server(url: url, token: token))
    }

    func stop() async {
        task.cancel()
        _ = await task.result
        try? FileManager.default.removeItem(at: folder)
    }
}
