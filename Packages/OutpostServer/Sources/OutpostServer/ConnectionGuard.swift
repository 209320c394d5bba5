import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes

/// The connections the server holds open, shared by every connection's `ConnectionGuard`, and which of
/// them are idle: connected with no request under way (none sent yet, a head still trickling in, or
/// between requests on a kept-alive connection).
///
/// At `maximum`, a new connection takes the place of the one idle longest, and is refused only when every
/// connection has a request under way. Refusing new connections at the limit let 1,030 connections that
/// sent nothing lock every client, probes included, out for the whole idle timeout (TLS alike): a
/// connection costs its holder nothing until it sends a request, so it holds its place only while it has
/// one under way.
final class OpenConnections: Sendable {
    private struct State {
        var open: Set<Int> = []
        /// Idle connections, with when each became idle (a sequence number: smaller is longer ago).
        var idle: [Int: (since: Int, channel: any Channel)] = [:]
        /// Busy connections whose request body is still arriving, with when it began (as `idle`'s).
        var receiving: [Int: (since: Int, channel: any Channel)] = [:]
        /// Connections whose client has left an answer unread (the socket full), with since when.
        var stalled: [Int: (since: Int, channel: any Channel)] = [:]
        var next = 0

        /// Takes `number` out of `idle` and `receiving` and, when it is still counted (not displaced
        /// meanwhile, which must not bring it back), puts it in `place` as of now.
        mutating func move(_ number: Int, _ channel: any Channel, to place: WritableKeyPath<State, [Int: (since: Int, channel: any Channel)]>) {
            idle[number] = nil
            receiving[number] = nil
            guard open.contains(number) else { return }
            next += 1
            self[keyPath: place][number] = (next, channel)
        }
        /// Every connection ever admitted: what a caller waits on to know its connection was seen.
        var admitted = 0
    }

    private let state = NIOLockedValueBox(State())
    let maximum: Int

    init(maximum: Int) {
        self.maximum = maximum
    }

    /// Counts `channel` in, idle, and returns its number. When the server already holds `maximum`, it
    /// takes the place of the connection idle longest, or else of the one whose request body has been
    /// arriving longest, or else of the one whose answer has gone unread longest; nil (and not counted)
    /// when every connection's request is being answered to a client that reads. The
    /// connection it displaces is closed. A few members' tokens (each under its own bound of requests,
    /// `BodiesInFlight.maximumRequestsPerCaller`) trickling bodies on every connection kept every newcomer
    /// out (attack 97); a body still arriving is what a device sends again at least cost.
    func admit(_ channel: any Channel) -> Int? {
        let (admitted, displaced): (Int?, (any Channel)?) = state.withLockedValue { state in
            var displaced: (any Channel)?
            if state.open.count >= maximum {
                let byAge = { (a: (key: Int, value: (since: Int, channel: any Channel)), b: (key: Int, value: (since: Int, channel: any Channel))) in
                    a.value.since < b.value.since
                }
                if let oldest = state.idle.min(by: byAge) {
                    state.idle[oldest.key] = nil
                    state.open.remove(oldest.key)
                    displaced = oldest.value.channel
                } else if let slowest = state.receiving.min(by: byAge) ?? state.stalled.min(by: byAge) {
                    state.receiving[slowest.key] = nil
                    state.stalled[slowest.key] = nil
                    state.open.remove(slowest.key)
                    displaced = slowest.value.channel
                } else {
                    return (nil, nil)
                }
            }
            let number = state.next
            state.next += 1
            state.open.insert(number)
            state.idle[number] = (state.next, channel)
            state.admitted += 1
            return (number, displaced)
        }
        displaced?.close(promise: nil)
        return admitted
    }

    /// Connection `number` has a request under way, its body arriving: it keeps its place while any
    /// connection is idle.
    func busy(_ number: Int, _ channel: any Channel) {
        state.withLockedValue { $0.move(number, channel, to: \.receiving) }
    }

    /// Connection `number`'s client leaves its answer unread (the socket is full), or reads again
    /// (`unread` false): while unread, a newcomer may take its place when none is idle or receiving. Forty
    /// pulls of large pages left unread on every connection kept every newcomer out until the stall
    /// timeout, and again at once (attack 98).
    func answer(of number: Int, _ channel: any Channel, unread: Bool) {
        state.withLockedValue { state in
            guard unread else { return _ = state.stalled.removeValue(forKey: number) }
            guard state.open.contains(number), state.stalled[number] == nil else { return }
            state.next += 1
            state.stalled[number] = (state.next, channel)
        }
    }

    /// Connection `number`'s request body has arrived whole: it keeps its place until answered.
    func bodyArrived(_ number: Int) {
        state.withLockedValue { _ = $0.receiving.removeValue(forKey: number) }
    }

    /// Connection `number` has answered everything it was asked; a newcomer may take its place.
    func idle(_ number: Int, _ channel: any Channel) {
        state.withLockedValue { $0.move(number, channel, to: \.idle) }
    }

    func release(_ number: Int) {
        state.withLockedValue { state in
            state.open.remove(number)
            state.idle[number] = nil
            state.receiving[number] = nil
            state.stalled[number] = nil
        }
    }

    var current: Int { state.withLockedValue { $0.open.count } }
    /// How many open connections leave an answer unread.
    var stalledCount: Int { state.withLockedValue { $0.stalled.count } }
    /// How many open connections have no request under way.
    var idleCount: Int { state.withLockedValue { $0.idle.count } }
    /// How many connections have been admitted since the server started (displaced and closed ones included).
    var admittedCount: Int { state.withLockedValue { $0.admitted } }
}

/// How much of the answers' bodies one connection has written to its socket, for a long answer to keep
/// pace with its client. Hummingbird's body writer returns once a piece is queued for the event loop,
/// not once the socket took it, and the channel turns unwritable only when the loop has run the queued
/// writes: a bundle encoded ahead into its spool went whole, 13 MB, to NIO's buffer in 25 ms for a
/// client that read none of it, and its download slot was given back at once, so `BundleGate` bounded
/// neither the downloads under way nor the memory they held. A sender waits here instead.
package final class WriteProgress: Sendable {
    private struct State {
        var written = 0
        var closed = false
        var waiters: [(target: Int, continuation: CheckedContinuation<Void, any Error>)] = []
    }

    private let state = NIOLockedValueBox(State())

    /// The connection is gone: there is nothing a sender could wait for.
    struct Closed: Error, CustomStringConvertible {
        var description: String { "the connection closed before the answer was written" }
    }

    /// Body bytes the socket has taken so far.
    var written: Int { state.withLockedValue { $0.written } }

    /// Returns once the socket has taken `target` body bytes in all; throws `Closed` when the connection
    /// closes first (a stalled client cut by `ConnectionGuard` ends its download here).
    func wait(untilWritten target: Int) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome: Result<Void, any Error>? = state.withLockedValue { state in
                if state.closed { return .failure(Closed()) }
                if state.written >= target { return .success(()) }
                state.waiters.append((target, continuation))
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    fileprivate func add(_ bytes: Int) {
        let due = state.withLockedValue { state in
            state.written += bytes
            let due = state.waiters.filter { $0.target <= state.written }
            state.waiters.removeAll { $0.target <= state.written }
            return due.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    fileprivate func close() {
        let waiting = state.withLockedValue { state in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters.map(\.continuation)
        }
        for continuation in waiting { continuation.resume(throwing: Closed()) }
    }

    /// The progress of the connection `channel` is, as its `ConnectionGuard` counts it; nil on a channel
    /// without one.
    static func of(_ channel: any Channel) async -> WriteProgress? {
        try? await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: ConnectionGuard.self).progress
        }.get()
    }
}

/// The request body bytes under way on every connection: from a body's first byte until its answer is
/// written, counted per caller (the bearer token its request names) and in all. Bodies are held whole
/// while they arrive and while their request is served, so without a bound one member's token opening
/// connections and holding back each body's last bytes held the server at 1.36 GB, which it kept after
/// they were gone (attack 86, F1); the slow-body rule never fires for bytes that came fast.
final class BodiesInFlight: Sendable {
    private struct State {
        var total = 0
        var byCaller: [String: Int] = [:]
        var requestsByCaller: [String: Int] = [:]
    }

    private let state = NIOLockedValueBox(State())
    let perCaller: Int
    let total: Int

    /// The most requests one caller may have under way at once, from a head to its answer's end. A
    /// device has a few (a pull and the page read ahead, a push, an upload or two, a bundle); one member's
    /// token holding every connection the server allows with pushes whose bodies trickled kept every
    /// newcomer out (attack 95, F1). Requests naming no token are answered at once, and not counted.
    static let maximumRequestsPerCaller = 32

    init(perCaller: Int, total: Int) {
        self.perCaller = perCaller
        self.total = total
    }

    /// Counts `bytes` more under way for `caller`; false, with nothing counted, past either bound.
    ///
    /// An answer's bytes are counted too, from when they are handed to a connection until its socket
    /// takes them, against the caller's bound alone (`inAll` false): an answer is held whole until then,
    /// and one member's tokens sending pushes whose answers (500 conflicts, 15 MB) they never read, on 32
    /// connections each, took a server from 133 MB to 2.4 GB, still 1.6 GB after the sockets closed
    /// (attack 113, F1). Not against the bound of all callers: answers a few callers left unread would
    /// then cut everyone else's.
    func take(_ bytes: Int, for caller: String, inAll: Bool = true) -> Bool {
        state.withLockedValue { state in
            let callers = state.byCaller[caller, default: 0] + bytes
            guard callers <= perCaller, !inAll || state.total + bytes <= total else { return false }
            state.byCaller[caller] = callers
            if inAll { state.total += bytes }
            return true
        }
    }

    /// Counts one more request under way for `caller`; false, with nothing counted, past
    /// `maximumRequestsPerCaller`. The empty caller (no token) is not counted.
    func startRequest(for caller: String) -> Bool {
        guard !caller.isEmpty else { return true }
        return state.withLockedValue { state in
            let requests = state.requestsByCaller[caller, default: 0] + 1
            guard requests <= Self.maximumRequestsPerCaller else { return false }
            state.requestsByCaller[caller] = requests
            return true
        }
    }

    /// `count` of `caller`'s requests are no longer under way.
    func finishRequests(_ count: Int, for caller: String) {
        guard count > 0 else { return }
        state.withLockedValue { state in
            let left = state.requestsByCaller[caller, default: 0] - count
            state.requestsByCaller[caller] = left > 0 ? left : nil
        }
    }

    /// The bytes counted for `caller` now: bodies under way and answers not yet taken (for tests).
    func held(by caller: String) -> Int {
        state.withLockedValue { $0.byCaller[caller] ?? 0 }
    }

    /// `bytes` of `caller`'s are no longer under way (`inAll` as they were taken).
    func give(_ bytes: Int, for caller: String, inAll: Bool = true) {
        guard bytes > 0 else { return }
        state.withLockedValue { state in
            let left = state.byCaller[caller, default: 0] - bytes
            state.byCaller[caller] = left > 0 ? left : nil
            if inAll { state.total -= bytes }
        }
    }

    /// Who a request's body is counted against: its bearer token (the last word of `Authorization`,
    /// however the scheme is spelled), or the empty caller for a request that names none.
    static func caller(of authorization: String?) -> String {
        authorization.flatMap { $0.split(whereSeparator: \.isWhitespace).last.map(String.init) } ?? ""
    }
}

/// Bounds what one connection may cost the server, beside Hummingbird's idle timeout (which closes a
/// connection that sends no complete request head in time, slow header trickles included): a
/// connection past `OpenConnections.maximum` displaces the one idle longest, or is closed at once when
/// every connection has a request under way; one whose client stops reading an
/// answer (a stalled bundle download: the socket stays unwritable) is closed after `stalledWrite`; and
/// one whose request body arrives slower than `minimumBodyRate` on average, once `bodyGrace` has
/// passed since its head, is closed too: a valid token sending a million-byte body one byte a second
/// on every connection the server allows locked every other client out. A stalled reader also held a
/// read transaction open and kept the SQLite WAL from being checkpointed (309 MB after 10,000
/// pushes); closing it lets the next checkpoint run. A body that would pass what its caller, or every
/// caller together, may have under way (`BodiesInFlight`) has its connection closed as it arrives, and
/// so does a request past the number one caller may have under way (`maximumRequestsPerCaller`).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The slowest average a request body may arrive at, once `bodyGrace` has passed.
    static let minimumBodyRate = 1_024
    /// How long a body may take before its rate is judged.
    static let bodyGrace: TimeAmount = .seconds(10)

    private let connections: OpenConnections
    private let bodies: BodiesInFlight
    /// This connection's body bytes counted in `bodies`, by caller, until its answers are written.
    private var held: [String: Int] = [:]
    /// This connection's requests counted in `bodies` (`BodiesInFlight.startRequest`), by caller, until
    /// its answers are written.
    private var heldRequests: [String: Int] = [:]
    /// Who the body under way is counted against (`BodiesInFlight.caller(of:)`).
    private var caller = ""
    private let stalledWrite: TimeAmount
    /// This connection's number in `connections`; nil when it was not admitted.
    private var number: Int?
    /// Requests received and not yet answered to their end (a client may send the next one early).
    private var unanswered = 0
    private var stallTimer: Scheduled<Void>?
    /// When a write of an answer last reached the socket: while the connection is unwritable, the
    /// client is reading only if writes still complete.
    private var lastWritten = NIODeadline.now()
    private var bodyCheck: RepeatedTask?
    private var bodyStarted: NIODeadline?
    private var bodyBytes = 0
    /// The answers' body bytes this connection's socket has taken.
    let progress = WriteProgress()

    init(connections: OpenConnections, bodies: BodiesInFlight, stalledWrite: TimeAmount) {
        self.connections = connections
        self.bodies = bodies
        self.stalledWrite = stalledWrite
    }

    /// Gives back every body byte this connection counted.
    private func giveBackBodies() {
        for (caller, bytes) in held { bodies.give(bytes, for: caller) }
        held = [:]
        for (caller, count) in heldRequests { bodies.finishRequests(count, for: caller) }
        heldRequests = [:]
    }

    func handlerAdded(context: ChannelHandlerContext) {
        number = connections.admit(context.channel)
        if number == nil { context.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        progress.close()
        stallTimer?.cancel()
        stallTimer = nil
        bodyCheck?.cancel()
        bodyCheck = nil
        giveBackBodies()
        if let number {
            connections.release(number)
            self.number = nil
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            caller = BodiesInFlight.caller(of: head.headerFields[.authorization])
            guard bodies.startRequest(for: caller) else {
                context.close(promise: nil)
                return
            }
            if !caller.isEmpty { heldRequests[caller, default: 0] += 1 }
            unanswered += 1
            if let number { connections.busy(number, context.channel) }
            bodyStarted = .now()
            bodyBytes = 0
            if bodyCheck == nil {
                let channel = context.channel
                // Runs on this channel's event loop, as the handler does (cancelled when it is removed).
                let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
                bodyCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: Self.bodyGrace, delay: .seconds(2)) { _ in
                    if handler.value.isTooSlow() { channel.close(promise: nil) }
                }
            }
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
            // Counted while its answer is to come: once written, the rest of the body is dropped unread.
            if unanswered > 0 {
                guard context.channel.isActive else { return }  // cut already; its bytes are given back
                guard bodies.take(buffer.readableBytes, for: caller) else {
                    // Given back now, not when the handler is removed: a second body arriving meanwhile on
                    // another event loop met the bytes still counted, and was cut as well (seen under load).
                    giveBackBodies()
                    context.close(promise: nil)
                    return
                }
                held[caller, default: 0] += buffer.readableBytes
            }
        case .end:
            if let number { connections.bodyArrived(number) }
            bodyStarted = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = unwrapOutboundIn(data)
        guard case .end = part, let number else {
            // Each piece's completion is the client's progress (see `channelWritabilityChanged`), and
            // what a long answer's sender waits for (`WriteProgress`).
            let bytes: Int
            if case .body(let buffer) = part { bytes = buffer.readableBytes } else { bytes = 0 }
            let written = promise ?? context.eventLoop.makePromise()
            // Counted against its caller until the socket takes it; past the caller's bound the connection
            // is closed, and what it held with it (see `BodiesInFlight.take`).
            if bytes > 0, !caller.isEmpty {
                guard bodies.take(bytes, for: caller, inAll: false) else {
                    written.fail(ChannelError.ioOnClosedChannel)
                    context.close(promise: nil)
                    return
                }
                let bodies = self.bodies, caller = self.caller
                written.futureResult.whenComplete { _ in bodies.give(bytes, for: caller, inAll: false) }
            }
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let progress = self.progress
            written.futureResult.whenSuccess {
                handler.value.lastWritten = .now()
                if bytes > 0 { progress.add(bytes) }
            }
            context.write(data, promise: written)
            return
        }
        // Idle once the answer's end is written, not merely queued: a connection displaced while its
        // answer waits in the buffer would lose the answer.
        let written = promise ?? context.eventLoop.makePromise()
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let channel = context.channel, connections = self.connections
        written.futureResult.whenSuccess {
            handler.value.unanswered -= 1
            if handler.value.unanswered == 0 {
                handler.value.giveBackBodies()
                connections.idle(number, channel)
            }
        }
        context.write(data, promise: written)
    }

    /// Whether the request body under way has arrived slower than `minimumBodyRate` past `bodyGrace`.
    private func isTooSlow() -> Bool {
        guard let started = bodyStarted else { return false }
        let elapsed = NIODeadline.now() - started
        guard elapsed > Self.bodyGrace else { return false }
        return Double(bodyBytes) / (Double(elapsed.nanoseconds) / 1e9) < Double(Self.minimumBodyRate)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if let number { connections.answer(of: number, context.channel, unread: !context.channel.isWritable) }
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
        } else if stallTimer == nil {
            lastWritten = .now()
            scheduleStallCheck(context, in: stalledWrite)
        }
        context.fireChannelWritabilityChanged()
    }

    /// Closes the connection once it has been unwritable with no write reaching the socket for
    /// `stalledWrite`. Unwritable alone says nothing of the client: the kernel's send buffer (4 MB,
    /// autotuned) stays full while a client reads it steadily but slowly, and a reader at 63 KB/s was cut
    /// 60 s into a bundle as stalled (attack 56); each write that completes shows it is still reading.
    private func scheduleStallCheck(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        let channel = context.channel
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        stallTimer = context.eventLoop.scheduleTask(in: delay) {
            let guardHandler = handler.value
            let quiet = NIODeadline.now() - guardHandler.lastWritten
            if quiet >= guardHandler.stalledWrite {
                channel.close(promise: nil)
            } else {
                guardHandler.scheduleStallCheck(loopContext.value, in: guardHandler.stalledWrite - quiet)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        progress.close()
        stallTimer?.cancel()
        stallTimer = nil
        bodyCheck?.cancel()
        bodyCheck = nil
        context.fireChannelInactive()
    }
}
