import ArgumentParser
import Foundation
import OutpostConflicts
import OutpostFieldService
import OutpostServer
import OutpostSync
import OutpostWire

/// `outpost serve`: the reference sync server on one SQLite file (demos, tests, small teams) or on a
/// PostgreSQL database that several instances share.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the reference sync server (schemas/sync-api.yaml) on one SQLite file or on PostgreSQL.",
        discussion: """
            The database is created and migrated on start (a file with tables that are not a server's \
            is refused, unchanged); media files go in a folder next to it. \
            With --postgres URL (postgres://user:password@host:port/database?sslmode=verify-full) records \
            live in PostgreSQL, migrated on start, and several servers may share it; --media is then \
            required (a folder every instance shares). Without a password in the URL, PGPASSWORD is used. \
            Prints 'listening on http(s)://HOST:PORT' once it accepts connections (with --port 0, the port \
            picked). Stops cleanly on SIGTERM or SIGINT. --seed sets a new server up with projects, members \
            and tokens from a JSON file (see Packages/OutpostServer/README.md), on its first start only: \
            given again later it changes nothing (it would undo removals and revocations); use outpost admin.
            """
    )

    @Option(help: "The server's SQLite file; created when it does not exist.")
    var db: String?

    @Option(help: "A PostgreSQL URL to keep records in instead of a SQLite file (postgres://user@host:port/db).")
    var postgres: String?

    @Option(help: "The port to listen on (0 picks a free one).")
    var port: Int = 8080

    @Option(help: "The address to bind.")
    var host: String = "127.0.0.1"

    @Flag(name: .customLong("server-ids"), help: "Assign integer server ids to creates, returned as serverID.")
    var serverIDs = false

    @Option(help: "A JSON file of projects, members and tokens to create before serving.")
    var seed: String?

    @Option(help: "Where media files go (default: <db>.media next to the database).")
    var media: String?

    @Option(help: "The most mutations one push may carry.")
    var maxBatch: Int = 500

    @Option(help: "The most changes one pull page returns.")
    var maxPull: Int = ServerConfiguration.defaultMaximumPullLimit

    @Option(help: "Bytes of stored records after which a pull page stops early (at least one change goes).")
    var maxPullBytes: Int = 4 * 1024 * 1024

    @Flag(
        name: .customLong("no-read-ahead"),
        help: "Read each pull page only when asked, instead of preparing the next one while the client applies its page.")
    var noReadAhead = false

    @Option(help: "The largest media file accepted, in bytes.")
    var maxMediaBytes: Int64 = 1024 * 1024 * 1024

    @Option(help: "The most media bytes one project's live attachments may hold.")
    var maxProjectMediaBytes: Int64 = 100 << 30

    @Option(help: "The most media bytes one member's live attachments may hold, across projects.")
    var maxUserMediaBytes: Int64 = 25 << 30

    @Option(help: "The most bytes one project's records may hold as stored: past it a change that adds bytes is refused.")
    var maxProjectRecordBytes: Int64 = 4 << 30

    @Option(help: "The most bytes the records one member wrote last may hold, across projects.")
    var maxUserRecordBytes: Int64 = 1 << 30

    @Option(help: "Free disk bytes media uploads leave for the database: an upload past it is refused (507).")
    var mediaDiskReserve: Int64 = 256 << 20

    @Option(help: "Free disk bytes pushes leave on the SQLite file's volume: a push past it is refused (507), pulls still answer.")
    var databaseDiskReserve: Int64 = 64 << 20

    @Option(help: "Seconds a connection may stay open without sending a complete request head (idle or trickling headers).")
    var idleTimeout: Int = 30

    @Option(help: "Seconds a client may leave an answer unread before its connection is closed.")
    var stalledWriteTimeout: Int = 60

    @Option(help: "Seconds in all a bundle download's encoder may wait, its database snapshot held, for a client reading more than 256 MiB behind it; past it the download is cut.")
    var bundleSnapshotWait: Int = 60

    @Option(help: "Seconds a request waits for a lock (another instance's or process's write) before a 503; on PostgreSQL a statement gets six times this.")
    var databaseLockWait: Int = 10

    @Option(help: "PostgreSQL: seconds a session may sit idle inside a transaction before the database ends it and frees its locks.")
    var idleTransactionTimeout: Int = 15

    @Option(help: "Requests a token may make per minute on this instance, bursts included; past it a request gets 429 with Retry-After. No limit when absent.")
    var requestsPerMinute: Int?

    @Option(help: "How many pushes and pulls of one user are worked on at once (pushes one at a time); the user's others wait their turn.")
    var requestsAtOncePerUser: Int = 2

    @Option(help: "The most connections held open at once; a new one past it displaces the one idle longest.")
    var maxConnections: Int = 1_024

    @Option(help: "A PEM certificate chain: with --tls-key, the server speaks HTTPS only.")
    var tlsCertificate: String?

    @Option(help: "The PEM private key of --tls-certificate.")
    var tlsKey: String?

    @Option(help: "A file holding the bearer token a Prometheus scraper sends for /metrics (an admin token is answered too; nothing else).")
    var metricsTokenFile: String?

    @Option(help: """
        Conflict strategies that differ from the catalog's, as entity=strategy pairs, comma-separated \
        (issue=manual,discount=serverWins); the devices must run the same (outpost sync --conflict-policy).
        """)
    var conflictPolicy: String = "default"

    @Option(help: "The least severe log level written to standard error (trace … critical; info logs each request).")
    var logLevel: String = "info"

    func validate() throws {
        guard (db == nil) != (postgres == nil) else {
            throw ValidationError("give exactly one of --db FILE and --postgres URL")
        }
        if SyncProtocol.conflictPolicy(fromText: conflictPolicy, strict: true) == nil {
            throw ValidationError("--conflict-policy: expected entity=strategy pairs, comma-separated, each entity once (`outpost entities` names them; strategies: \(ConflictStrategy.all.map(\.description).joined(separator: ", ")))")
        }
        if postgres != nil, media == nil {
            throw ValidationError("--postgres needs --media DIR: a folder every instance shares")
        }
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw ValidationError("--tls-certificate and --tls-key go together")
        }
    }

    func run() async throws {
        let server: SyncServer
        do {
            var configuration = ServerConfiguration(
                databasePath: db ?? "", host: host, port: port, mediaDirectory: media, assignsServerIDs: serverIDs,
                maximumBatchSize: maxBatch, maximumPullLimit: maxPull,
                maximumPullPageBytes: maxPullBytes, maximumMediaBytes: maxMediaBytes, logLevel: logLevel, postgresURL: postgres,
                readsPullsAhead: !noReadAhead,
                conflictPolicy: SyncProtocol.conflictPolicy(fromText: conflictPolicy, strict: true) ?? ConflictPolicy(),
                idleTimeoutSeconds: idleTimeout, stalledWriteSeconds: stalledWriteTimeout, maximumConnections: maxConnections)
            configuration.bundleSnapshotWaitSeconds = bundleSnapshotWait
            configuration.requestsPerMinutePerToken = requestsPerMinute
            configuration.requestsWorkedAtOncePerUser = requestsAtOncePerUser
            configuration.tlsCertificatePath = tlsCertificate
            configuration.tlsKeyPath = tlsKey
            if let metricsTokenFile {
                configuration.metricsToken = try String(contentsOfFile: metricsTokenFile, encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            configuration.maximumMediaBytesPerProject = maxProjectMediaBytes
            configuration.maximumMediaBytesPerUser = maxUserMediaBytes
            configuration.maximumRecordBytesPerProject = maxProjectRecordBytes
            configuration.maximumRecordBytesPerUser = maxUserRecordBytes
            configuration.mediaDiskReserveBytes = mediaDiskReserve
            configuration.databaseDiskReserveBytes = databaseDiskReserve
            configuration.databaseLockWaitSeconds = databaseLockWait
            configuration.idleTransactionSeconds = idleTransactionTimeout
            server = try SyncServer(configuration: configuration)
            if let seed, try await !server.load(ServerSeed(contentsOf: URL(fileURLWithPath: seed))) {
                FileHandle.standardError.write(Data(
                    "note: this server was set up before; \(seed) is not loaded again (outpost admin changes members and tokens)\n".utf8))
            }
        } catch {
            throw CommandFailure("\(error)")
        }
        let host = self.host
        try await server.run { port in
            // Written straight to the descriptor: a pipe reading the port must not wait for a buffer to fill.
            FileHandle.standardOutput.write(Data("listening on \(tlsKey == nil ? "http" : "https")://\(host):\(port)\n".utf8))
        }
    }
}
