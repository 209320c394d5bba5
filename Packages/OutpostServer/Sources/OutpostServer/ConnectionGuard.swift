import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes

/// How many connections the server holds open, shared by every connection's `ConnectionGuard`.
final class OpenConnections: Sendable {
    private let count = NIOLockedValueBox(0)
    let maximum: Int

    init(maximum: Int) {
        self.maximum = maximum
    }

    /// Counts one more connection; false (and not counted) when the server already holds `maximum`.
    func admit() -> Bool {
        count.withLockedValue { open in
            guard open < maximum else { return false }
            open += 1
            return true
        }
    }

    func release() {
        count.withLockedValue { $0 -= 1 }
    }

    var current: Int { count.withLockedValue { $0 } }
}

/// Bounds what one connection may cost the server, beside Hummingbird's idle timeout (which closes a
/// connection that sends no complete request head in time, slow header trickles included): a
/// connection past `OpenConnections.maximum` is closed at once; one whose client stops reading an
/// answer (a stalled bundle download: the socket stays unwritable) is closed after `stalledWrite`; and
/// one whose request body arrives slower than `minimumBodyRate` on average, once `bodyGrace` has
/// passed since its head, is closed too: a valid token sending a million-byte body one byte a second
/// on every connection the server allows locked every other client out. A stalled reader also held a
/// read transaction open and kept the SQLite WAL from being checkpointed (309 MB after 10,000
/// pushes); closing it lets the next checkpoint run.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// The slowest average a request body may arrive at, once `bodyGrace` has passed.
    static let minimumBodyRate = 1_024
    /// How long a body may take before its rate is judged.
    static let bodyGrace: TimeAmount = .seconds(10)

    private let connections: OpenConnections
    private let stalledWrite: TimeAmount
    private var admitted = false
    private var stallTimer: Scheduled<Void>?
    private var bodyCheck: RepeatedTask?
    private var bodyStarted: NIODeadline?
    private var bodyBytes = 0

    init(connections: OpenConnections, stalledWrite: TimeAmount) {
        self.connections = connections
        self.stalledWrite = stalledWrite
    }

    func handlerAdded(context: ChannelHandlerContext) {
        admitted = connections.admit()
        if !admitted { context.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stallTimer?.cancel()
        stallTimer = nil
        bodyCheck?.cancel()
        bodyCheck = nil
        if admitted {
            connections.release()
            admitted = false
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
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
        case .end:
            bodyStarted = nil
        }
        context.fireChannelRead(data)
    }

    /// Whether the request body under way has arrived slower than `minimumBodyRate` past `bodyGrace`.
    private func isTooSlow() -> Bool {
        guard let started = bodyStarted else { return false }
        let elapsed = NIODeadline.now() - started
        guard elapsed > Self.bodyGrace else { return false }
        return Double(bodyBytes) / (Double(elapsed.nanoseconds) / 1e9) < Double(Self.minimumBodyRate)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
        } else if stallTimer == nil {
            let channel = context.channel
            stallTimer = context.eventLoop.scheduleTask(in: stalledWrite) { channel.close(promise: nil) }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stallTimer?.cancel()
        stallTimer = nil
        bodyCheck?.cancel()
        bodyCheck = nil
        context.fireChannelInactive()
    }
}
