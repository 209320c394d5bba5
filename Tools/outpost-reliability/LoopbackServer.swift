import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostServer
import OutpostStore
import OutpostSync

/// A real `SyncServer` in this process, answering HTTP on 127.0.0.1 (port 0, read back), seeded with the
/// crew: the devices under test reach it through `HTTPTransport`, faults and all, unlike
/// `OutpostServerTesting.InProcessServer`, which skips HTTP.
final class LoopbackServer: Sendable {
    let databasePath: String
    let port: Int
    private let task: Task<Void, any Error>

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    private init(databasePath: String, port: Int, task: Task<Void, any Error>) {
        self.databasePath = databasePath
        self.port = port
        self.task = task
    }

    /// Starts a server on a new database file at `databasePath` and waits until it listens. `policy` is
    /// the app's conflict policy, which the server must settle pushes with too.
    static func start(
        databasePath: String, assignsServerIDs: Bool = true, policy: ConflictPolicy = ConflictPolicy()
    ) async throws -> LoopbackServer {
        let server = try SyncServer(configuration: ServerConfiguration(
            databasePath: databasePath, port: 0, assignsServerIDs: assignsServerIDs, logLevel: "critical",
            conflictPolicy: policy))
        try await server.load(Crew.seed)
        let (port, task) = try await serve(server)
        return LoopbackServer(databasePath: databasePath, port: port, task: task)
    }

    /// Runs `server` in this process and waits until it listens: its port and the task serving.
    static func serve(_ server: SyncServer) async throws -> (port: Int, task: Task<Void, any Error>) {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task { try await server.run(handlingSignals: false) { continuation.yield($0) } }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            task.cancel()
            throw ReliabilityError("the in-process server did not start")
        }
        return (port, task)
    }

    /// A fault-free transport as crew member `index`.
    func transport(for index: Int) -> HTTPTransport {
        HTTPTransport(configuration: .init(baseURL: url, schemaVersion: LocalSchema.latestVersion), token: Crew.token(of: index))
    }

    func stop() async {
        task.cancel()
        _ = await task.result
    }
}

struct ReliabilityError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
