import ContractorJobs
import Foundation
import OutpostServer

// The contractor job app's server: Outpost's reference server, serving this app's schema.
// `contractor-jobs-server DATABASE [PORT] [SEED]`. SEED, read on the first start only, names the first
// operator and their admin token; the admin API (`/admin/…`) adds jobs' crews and their tokens after.
let arguments = Array(CommandLine.arguments.dropFirst())
let usage = "usage: contractor-jobs-server DATABASE [PORT] [SEED]\n"
guard (1...3).contains(arguments.count), !arguments[0].hasPrefix("-"), arguments.count < 2 || Int(arguments[1]) != nil else {
    let asked = ["-h", "--help"].contains(arguments.first ?? "")
    FileHandle(fileDescriptor: asked ? 1 : 2).write(Data(usage.utf8))
    exit(asked ? 0 : 64)
}
do {
    let configuration = ServerConfiguration(
        databasePath: arguments[0], port: arguments.count > 1 ? Int(arguments[1])! : 8080, assignsServerIDs: true,
        schemaVersions: 1...ContractorJobs.steps.count)
    let server = try SyncServer(serving: ContractorJobs.schema, configuration: configuration)
    if arguments.count > 2 { try await server.load(ServerSeed(contentsOf: URL(fileURLWithPath: arguments[2]))) }
    try await server.run { port in print("serving contractor jobs on 127.0.0.1:\(port)") }
} catch {
    // A refusal (another app's database, a bad seed) is said once, not as a crash.
    FileHandle.standardError.write(Data("contractor-jobs-server: \(error)\n".utf8))
    exit(1)
}
