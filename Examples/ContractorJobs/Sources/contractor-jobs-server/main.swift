import ContractorJobs
import Foundation
import OutpostServer

// The contractor job app's server: Outpost's reference server, serving this app's schema.
// `contractor-jobs-server DATABASE [PORT]`
let arguments = CommandLine.arguments
let configuration = ServerConfiguration(
    databasePath: arguments.count > 1 ? arguments[1] : "jobs-server.sqlite",
    port: arguments.count > 2 ? Int(arguments[2]) ?? 8080 : 8080, assignsServerIDs: true,
    schemaVersions: 1...ContractorJobs.steps.count)
let server = try SyncServer(serving: ContractorJobs.schema, configuration: configuration)
try await server.run { port in print("serving contractor jobs on 127.0.0.1:\(port)") }
