import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import OutpostWire

/// A scripted HTTP server on 127.0.0.1 and a port the OS picks, in the test process on SwiftNIO's
/// own event-loop threads: it answers each `METHOD /path` with a canned response, gunzips request
/// bodies, and logs every request.
///
/// Why in process: a python3 server per test (the form before this one) had to start an interpreter
/// and answer on a core the test run shares; beside a CPU-bound process 21 transport tests timed out
/// at their 5 s deadlines waiting for python, not for the transport (issue 41, item 7). Here a delay or
/// a drip is a timer on an event loop, so a deadline measures the client. The loops are the scripted
/// servers' own, not the process's shared ones the transports and the in-process reference servers
/// use: on those, in a whole `make test`, two answers of these servers never came (300 s).
final class LocalHTTPServer: Sendable {
    /// A canned answer.
    struct Response: Sendable {
        var status = 200
        var body: String = ""
        var headers: [String: String] = [:]
        /// Send the body gzip-compressed with `Content-Encoding: gzip`.
        var gzip = false
        /// Wait this long before answering (to provoke a client timeout).
        var delaySeconds = 0.0
        /// Send the body one byte at a time, this many seconds apart (a server that drips its answer).
        var dripSeconds = 0.0
    }

    /// One request as the server saw it.
    struct LoggedRequest: Sendable {
        var method: String
        var path: String
        var headers: [String: String]
        /// The body after gunzipping, as UTF-8 (binary bodies are Latin-1 decoded).
        var body: String
        /// The body's size as it crossed the wire.
        var wireLength: Int

        func header(_ name: String) -> String? {
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    fileprivate struct Script: Sendable {
        var routes: [String: Response]
        var refuseGzip: Bool
        var refuseSharedClock: Bool
    }

    /// What the connections share: the log, and the open connections so `stop()` closes them all.
    fileprivate final class State: Sendable {
        let log = NIOLockedValueBox<[LoggedRequest]>([])
        let connections = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
        let stopped = NIOLockedValueBox(false)
    }

    /// Every scripted server's event loops, for the life of the test process.
    private static let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)

    let port: Int
    private let listener: any Channel
    private let state: State

    /// Starts the server; `routes` maps `"POST /v1/push"` (no query) to its answer. With
    /// `refuseSharedClock`, a body with a `"clock"` member gets 400 `invalid_request`, as from a server
    /// that requires `clocks`.
    init(routes: [String: Response], refuseGzip: Bool = false, refuseSharedClock: Bool = false) async throws {
        let script = Script(routes: routes, refuseGzip: refuseGzip, refuseSharedClock: refuseSharedClock)
        let state = State()
        listener = try await ServerBootstrap(group: Self.loops)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let refused = state.stopped.withLockedValue { stopped in
                        if !stopped { state.connections.withLockedValue { $0[ObjectIdentifier(channel)] = channel } }
                        return stopped
                    }
                    if refused { throw ChannelError.ioOnClosedChannel }
                    channel.closeFuture.whenComplete { _ in
                        state.connections.withLockedValue { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) }
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(script: script, state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = listener.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        self.port = port
        self.state = state
    }

    deinit {
        stop()
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)/v1/")! }

    /// Stops listening and closes every open connection, as a server that went away would.
    func stop() {
        let open = state.stopped.withLockedValue { stopped in
            stopped = true
            return state.connections.withLockedValue { Array($0.values) }
        }
        listener.close(promise: nil)
        for connection in open { connection.close(promise: nil) }
    }

    /// Every request served so far.
    func requests() async throws -> [LoggedRequest] {
        state.log.withLockedValue { $0 }
    }
}

/// One connection's requests: each is read whole, logged, and answered from the script.
private final class Handler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let script: LocalHTTPServer.Script
    private let state: LocalHTTPServer.State
    private var head: HTTPRequestHead?
    private var raw: [UInt8] = []

    init(script: LocalHTTPServer.Script, state: LocalHTTPServer.State) {
        self.script = script
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            raw = []
        case .body(let part):
            raw.append(contentsOf: part.readableBytesView)
        case .end:
            guard let head else { return }
            self.head = nil
            serve(head, context: context)
        }
    }

    private func serve(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        let compressed = head.headers.first(name: "Content-Encoding") == "gzip"
        var body = Data(raw)
        if compressed, case .complete(let plain) = Gzip.inflate(body, limit: 1 << 30) { body = plain }
        var headers: [String: String] = [:]
        for (name, value) in head.headers { headers[name] = value }
        let logged = LocalHTTPServer.LoggedRequest(
            method: head.method.rawValue, path: head.uri, headers: headers,
            body: String(data: body, encoding: .isoLatin1) ?? "", wireLength: raw.count)
        state.log.withLockedValue { $0.append(logged) }
        let json = ["Content-Type": "application/json"]
        if compressed && script.refuseGzip {
            let error = #"{"code": "unsupported_encoding", "message": "send it plain"}"#
            return answer(415, error, json.merging(["Accept-Encoding": "identity"]) { $1 }, head: head, context: context)
        }
        if script.refuseSharedClock && body.range(of: Data(#""clock":"#.utf8)) != nil {
            let error = #"{"code": "invalid_request", "message": "a mutation needs 'clocks'"}"#
            return answer(400, error, json.merging(["Outpost-Accepts": "shared-clock"]) { $1 }, head: head, context: context)
        }
        guard let route = script.routes[head.method.rawValue + " " + path] else {
            return answer(404, #"{"code": "not_found", "message": "no route \#(path)"}"#, json, head: head, context: context)
        }
        let routeHeaders = json.merging(["Outpost-Protocol-Version": "1"]) { $1 }.merging(route.headers) { $1 }
        let send = { [self] in
            if route.dripSeconds > 0 {
                drip(route, headers: routeHeaders, head: head, context: context)
            } else {
                answer(route.status, route.body, routeHeaders, gzip: route.gzip, head: head, context: context)
            }
        }
        if route.delaySeconds > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(route.delaySeconds * 1e9))) { send() }
        } else {
            send()
        }
    }

    private func responseHead(_ status: Int, _ headers: [String: String], length: Int, _ request: HTTPRequestHead)
        -> HTTPResponseHead
    {
        var fields = HTTPHeaders(headers.map { ($0.key, $0.value) })
        fields.replaceOrAdd(name: "Content-Length", value: String(length))
        return HTTPResponseHead(version: request.version, status: .init(statusCode: status), headers: fields)
    }

    private func answer(
        _ status: Int, _ text: String, _ headers: [String: String], gzip: Bool = false,
        head: HTTPRequestHead, context: ChannelHandlerContext
    ) {
        guard context.channel.isActive else { return }
        var data = Data(text.utf8)
        var headers = headers
        if gzip {
            data = Gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        }
        context.write(wrapOutboundOut(.head(responseHead(status, headers, length: data.count, head))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: data)))), promise: nil)
        finish(head: head, context: context)
    }

    /// The head at once, then the body a byte at a time on a timer, until it is sent or the client leaves.
    private func drip(
        _ route: LocalHTTPServer.Response, headers: [String: String], head: HTTPRequestHead, context: ChannelHandlerContext
    ) {
        guard context.channel.isActive else { return }
        let bytes = Array(route.body.utf8)
        context.writeAndFlush(
            wrapOutboundOut(.head(responseHead(route.status, headers, length: bytes.count, head))), promise: nil)
        let gap = TimeAmount.nanoseconds(Int64(route.dripSeconds * 1e9))
        func send(_ index: Int) {
            guard context.channel.isActive else { return }
            guard index < bytes.count else { return finish(head: head, context: context) }
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: [bytes[index]])))), promise: nil)
            context.eventLoop.assumeIsolated().scheduleTask(in: gap) { send(index + 1) }
        }
        send(0)
    }

    private func finish(head: HTTPRequestHead, context: ChannelHandlerContext) {
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        if !head.isKeepAlive {
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
