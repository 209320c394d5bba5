import Foundation
import OutpostTesting

/// The built `outpost` binary, found beside the test bundle in the build products folder.
enum Outpost {
    struct Result {
        let status: Int32
        let output: String
        let errorOutput: String
    }

    static var executable: URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("outpost").path),
            directory.pathComponents.count > 1
        {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("outpost")
    }

    /// Starts `outpost` with `arguments` and returns at once, output discarded: for tests that kill it.
    static func start(_ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Runs `outpost` with `arguments` to the end and returns its exit status and output, waiting off
    /// Swift's cooperative pool (`ChildProcess.finish`).
    static func run(_ arguments: [String]) async throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let (status, out, err) = try await ChildProcess.finish(process)
        return Result(
            status: status, output: String(decoding: out, as: UTF8.self), errorOutput: String(decoding: err, as: UTF8.self))
    }
}

/// A Python script run with `outpost`'s path and `folder` as its arguments (for tests that measure
/// `outpost` as a child: `wait4`'s peak memory): what it printed. Its failure is the test's.
enum OutpostScript {
    /// One `outpost` run as such a script reports it: exit status, peak memory, output, and the bytes
    /// it wrote where a script counts them.
    struct Run: Decodable {
        let status: Int
        let peakKB: Int
        let output: String
        let bytes: Int?
    }

    /// Runs `script` and decodes what it printed: its runs by name.
    static func runs(_ script: String, folder: URL) async throws -> [String: Run] {
        try JSONDecoder().decode([String: Run].self, from: try await run(script, folder: folder))
    }

    static func run(_ script: String, folder: URL) async throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, Outpost.executable.path, folder.path]
        let (status, output, errors) = try await ChildProcess.finish(process)
        guard status == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: String(decoding: errors, as: UTF8.self)])
        }
        return output
    }
}

/// Child processes run to their end without holding a thread of Swift's cooperative pool. That pool
/// has one thread per core: on a 2-core CI machine two tests blocked in `waitUntilExit` (the demo and
/// the reliability run take a minute each) left no thread for any other test for 40 s, so in-process
/// servers stopped answering and their clients' requests timed out.
enum ChildProcess {
    /// Runs the program `process` describes (executable, arguments, environment, folder) with its output
    /// and errors captured, waiting on a thread of its own until it exits. Started by
    /// `SpawnedProgram`, not by `process.run()`: Foundation's launch crashes in a process holding as
    /// many descriptors as this test process does (see `SpawnedProgram`).
    static func finish(_ process: Process) async throws -> (status: Int32, output: Data, errors: Data) {
        guard let executable = process.executableURL?.path else { throw CocoaError(.fileNoSuchFile) }
        let arguments = process.arguments ?? [], environment = process.environment
        let directory = process.currentDirectoryURL?.path
        let program = try await SpawnedProgram.run(executable, arguments: arguments, environment: environment, directory: directory)
        return (program.status, program.output, program.errors)
    }

    /// Waits for `process` to exit without holding a thread of the pool.
    static func waitUntilExit(_ process: Process) async {
        await offThePool { process.waitUntilExit() }
    }

    /// The first line `pipe` carries (without waiting for more), read off the pool; empty at its end.
    static func firstLine(of pipe: Pipe) async -> String {
        await offThePool {
            var printed = Data()
            while !printed.contains(UInt8(ascii: "\n")) {
                let chunk = pipe.fileHandleForReading.availableData
                guard !chunk.isEmpty else { break }
                printed.append(chunk)
            }
            return String(decoding: printed, as: UTF8.self)
        }
    }
}
