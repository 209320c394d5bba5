import NIOConcurrencyHelpers
import NIOCore

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
/// connection past `OpenConnections.maximum` is closed at once, and one whose client stops reading an
/// answer (a stalled bundle download: the socket stays unwritable) is closed after `stalledWrite`. A
/// stalled reader also held a read transaction open and kept the SQLite WAL from being checkpointed
/// (309 MB after 10,000 pushes); closing it lets the next checkpoint run.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    /// Whatever the HTTP decoder hands on: reads pass through untouched (the default `channelRead`).
    typealias InboundIn = Any

    private let connections: OpenConnections
    private let stalledWrite: TimeAmount
    private var admitted = false
    private var stallTimer: Scheduled<Void>?

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
        if admitted {
            connections.release()
            admitted = false
        }
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
        context.fireChannelInactive()
    }
}
