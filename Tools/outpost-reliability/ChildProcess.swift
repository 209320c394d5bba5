import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a child process ended.
struct ChildExit: Sendable, CustomStringConvertible {
    /// The exit status, or the signal number when `signaled`.
    let status: Int32
    let signaled: Bool

    var description: String { signaled ? "killed by signal \(status)" : "exit \(status)" }
}

/// A child process of the `outpost` binary, whose end can be awaited without blocking a thread.
final class Child: Sendable {
    let process: Process
    private let exits: AsyncStream<ChildExit>

    /// The built `outpost` binary, beside this one in the build products folder.
    static var outpostExecutable: URL {
        let me = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        return me.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("outpost")
    }

    /// Starts `outpost arguments…`; standard output goes to `output` when given, else nowhere.
    init(_ arguments: [String], output: Pipe? = nil) throws {
        let process = Process()
        process.executableURL = Self.outpostExecutable
        process.arguments = arguments
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let (exits, continuation) = AsyncStream.makeStream(of: ChildExit.self, bufferingPolicy: .bufferingNewest(1))
        process.terminationHandler = { finished in
            continuation.yield(ChildExit(status: finished.terminationStatus, signaled: finished.terminationReason == .uncaughtSignal))
            continuation.finish()
        }
        try process.run()
        self.process = process
        self.exits = exits
    }

    /// Waits for the end of the process.
    func exit() async -> ChildExit {
        for await exit in exits { return exit }
        return ChildExit(status: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal)
    }

    /// SIGKILL: no chance to clean up, as when the OS ends an app or the power goes.
    func kill() {
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
    }

    var isRunning: Bool { process.isRunning }

    /// SIGSTOP and SIGCONT: the process freezes with everything it holds (a VM paused, a debugger).
    func freeze() { _ = Glibc.kill(process.processIdentifier, SIGSTOP) }
    func thaw() { _ = Glibc.kill(process.processIdentifier, SIGCONT) }
}

/// `outpost serve` as a child process, seeded with the crew; restartable on the same database file.
final class ServeChild: Sendable {
    let child: Child
    let port: Int
    /// Kept open for the life of the server, so a late line on its output never meets a closed pipe.
    private let output: Pipe

    var url: String { "http://127.0.0.1:\(port)" }

    private init(child: Child, port: Int, output: Pipe) {
        self.child = child
        self.port = port
        self.output = output
    }

    /// Starts the server on `databasePath` (created on first start) and waits for its "listening on" line.
    static func start(databasePath: String, seedPath: String) throws -> ServeChild {
        try start(["--db", databasePath, "--seed", seedPath, "--server-ids"])
    }

    /// Starts `outpost serve` with `arguments` (the storage and its options) on `port` (0: a free one),
    /// quietly, and waits for its "listening on" line.
    static func start(_ arguments: [String], port: Int = 0) throws -> ServeChild {
        let output = Pipe()
        let child = try Child(["serve", "--port", String(port), "--log-level", "critical"] + arguments, output: output)
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            printed.append(chunk)
        }
        let line = String(decoding: printed, as: UTF8.self)
        guard let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            child.kill()
            throw ReliabilityError("outpost serve printed: \(line)")
        }
        return ServeChild(child: child, port: port, output: output)
    }
}
