import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to its end with its output and errors captured, started with `posix_spawn` directly.
///
/// Why not Foundation's `Process.run()`: on Linux (swift-corelibs-foundation of Swift 6.3.1) it lists
/// `/proc/self/fd` to close every inherited descriptor, copying each entry's whole 256-byte name field,
/// and that copy reads past glibc's buffer when it is nearly full: the process crashes ("Bad pointer
/// dereference" in `Process.run`; swiftlang/swift-corelibs-foundation#5472, fixed after 6.3.1). A
/// test process holds enough descriptors for it: 1,925 measured at `make test`'s peak (750 sockets,
/// 1,086 SQLite files of the servers and stores tests run at once), and one run in seven crashed so.
/// Here the child closes everything past standard error with `closefrom` semantics instead
/// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34), with no listing at all.
public enum SpawnedProgram {
    /// How a program ended, and what it wrote.
    public struct Finished: Sendable {
        /// Its exit code, or the number of the signal that ended it.
        public var status: Int32
        /// Whether a signal ended it.
        public var signaled: Bool
        /// Its standard output.
        public var output: Data
        /// Its standard error.
        public var errors: Data
        /// Its process id (exited: a pid no process holds until the system gives it out again).
        public var processIdentifier: Int32
    }

    /// Why a program could not be started.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, with errno's text.
        public var description: String
    }

    /// Runs `executable` with `arguments` (standard input from /dev/null) in `directory` (or this
    /// process's), with `environment` (or this process's), and waits for its end, reading both of its
    /// outputs meanwhile so neither fills and stalls it.
    ///
    /// Async, waiting on a thread of its own (`offThePool`), so no caller can hold a thread of Swift's
    /// cooperative pool for as long as a program runs. It blocked its caller, and the restore tests ran
    /// `pg_dump` and `pg_restore` through it, holding a pool thread each while they ran (a stack sample of
    /// a full run caught one waiting on `pg_dump`): on a 2-core machine, tests blocked so starved
    /// in-process servers (see Workspace.md's testing rules).
    public static func run(
        _ executable: String, arguments: [String], environment: [String: String]? = nil, directory: String? = nil
    ) async throws(Failure) -> Finished {
        let result = await offThePool {
            Result { () throws(Failure) in
                try runBlocking(executable, arguments: arguments, environment: environment, directory: directory)
            }
        }
        return try result.get()
    }

    private static func runBlocking(
        _ executable: String, arguments: [String], environment: [String: String]?, directory: String?
    ) throws(Failure) -> Finished {
        var output: [Int32] = [-1, -1], errors: [Int32] = [-1, -1]
        guard pipe(&output) == 0, pipe(&errors) == 0 else {
            throw Failure(description: "pipe: \(String(cString: strerror(errno)))")
        }
        // Close-on-exec, so a program another thread starts never holds a write end open (`pipe2` is
        // not in Swift's Glibc module; Foundation's spawns close every inherited descriptor anyway).
        for descriptor in output + errors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        // glibc's `_np` actions are not in Swift's Glibc module (they need _GNU_SOURCE): found by name.
        if let closeFrom = GlibcActions.closeFrom { _ = closeFrom(&actions, 3) }
        if let directory {
            guard let changeDirectory = GlibcActions.changeDirectory else {
                throw Failure(description: "this C library cannot start a program in another folder (posix_spawn_file_actions_addchdir_np)")
            }
            _ = changeDirectory(&actions, directory)
        }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { variables?.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = variables.map { posix_spawn(&pid, executable, &actions, nil, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(output[1])
        close(errors[1])
        guard spawned == 0 else {
            close(output[0])
            close(errors[0])
            throw Failure(description: "posix_spawn \(executable): \(String(cString: strerror(spawned)))")
        }
        let errorText = ReadToEnd(errors[0])
        let outputText = ReadToEnd(output[0]).wait()
        let errorBytes = errorText.wait()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0
            ? Finished(status: (status >> 8) & 0xff, signaled: false, output: outputText, errors: errorBytes, processIdentifier: pid)
            : Finished(status: signal, signaled: true, output: outputText, errors: errorBytes, processIdentifier: pid)
    }
}

/// glibc's non-portable spawn actions, looked up once.
private enum GlibcActions {
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34).
    static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: CloseFrom.self)
    }
    /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29).
    static let changeDirectory: ChangeDirectory? = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map {
        unsafeBitCast($0, to: ChangeDirectory.self)
    }
}

/// Reads a descriptor to its end on a thread of its own, then closes it.
private final class ReadToEnd: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()

    init(_ descriptor: Int32) {
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count > 0 {
                    data.append(contentsOf: buffer[0..<count])
                } else if count < 0, errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            close(descriptor)
            done.signal()
        }.start()
    }

    /// The bytes, once the other end closed.
    func wait() -> Data {
        done.wait()
        return data
    }
}
