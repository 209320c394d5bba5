import Foundation

/// Runs blocking work (a socket read with a timeout, a child process, a pipe read) on a thread of its
/// own and returns its value, suspending the caller instead of blocking it.
///
/// Why: Swift's cooperative pool has one thread per core. On a 2-core CI host, two tests blocked in a
/// `recv` or `waitUntilExit` leave no thread for anything else in the test process, so in-process
/// servers stop answering and unrelated tests fail (a `/health` probe timed out at 3 s, a client's
/// request at its deadline). Every blocking call in a test goes through here.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// `offThePool` for work that throws: its error is rethrown to the caller.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await offThePool { Result { try body() } }.get()
}
