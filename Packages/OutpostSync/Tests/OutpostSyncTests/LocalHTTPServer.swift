import AsyncHTTPClient
import Foundation
import OutpostTesting

/// A scripted HTTP server on 127.0.0.1 and a random free port, run by python3 for one test: it
/// answers each `METHOD /path` with a canned response, gunzips request bodies, and logs every request.
final class LocalHTTPServer {
    /// A canned answer.
    struct Response: Encodable {
        var status = 200
        var body: String = ""
        var headers: [String: String] = [:]
        /// Send the body gzip-compressed with `Content-Encoding: gzip`.
        var gzip = false
        /// Wait this long before answering (to provoke a client timeout).
        var delaySeconds = 0.0
        /// Send the body one piece at a time, this many seconds apart (a server that drips its answer).
        var dripSeconds = 0.0
        /// The size of each dripped piece (as sent: compressed, with `gzip`).
        var dripBytes = 1
        /// With `gzip`: the CRC in the gzip trailer does not match the body (a corrupt answer).
        var corruptGzipTrailer = false
        /// With `gzip`, when 0 or more: a whole HTTP answer of only this many bytes of the compressed
        /// body (a server that ends its answer inside the gzip stream).
        var gzipCutTo = -1
        /// When 0 or more: promise the whole body's length, send this many of its bytes, then close the
        /// connection (a download cut by the network part way).
        var cutAfterBytes = -1
        /// When above 0: instead of answering, send an interim answer (`102 Processing`) this many seconds
        /// apart until the client goes away (a server that never gets to its answer, each line resetting
        /// a client's read timer).
        var interimSeconds = 0.0
    }

    /// One request as the server saw it.
    struct LoggedRequest: Decodable {
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

    private struct Script: Encodable {
        var routes: [String: Response]
        var refuseGzip: Bool
        var refuseSharedClock: Bool
    }

    let port: Int
    private let process: Process
    private let directory: URL

    /// Starts the server; `routes` maps `"POST /v1/push"` (no query) to its answer. With
    /// `refuseSharedClock`, a body with a `"clock"` member gets 400 `invalid_request`, as from a server
    /// that requires `clocks`.
    init(routes: [String: Response], refuseGzip: Bool = false, refuseSharedClock: Bool = false) async throws {
        directory = URL(fileURLWithPath: "/tmp/sync-http-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = directory.appendingPathComponent("server.py")
        let config = directory.appendingPathComponent("routes.json")
        try Data(Self.source.utf8).write(to: script)
        try JSONEncoder().encode(Script(routes: routes, refuseGzip: refuseGzip, refuseSharedClock: refuseSharedClock)).write(to: config)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, config.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The first line is the port the OS picked, read on a thread of its own: blocking a
        // cooperative thread while python starts stalled every other test of the process (2 threads
        // on a 2-core machine, dozens of servers starting at once).
        let reader = output.fileHandleForReading
        let line = await offThePool {
            var line = Data()
            while !line.contains(UInt8(ascii: "\n")) {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                line.append(chunk)
            }
            return line
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            process.terminate()
            throw CocoaError(.fileReadCorruptFile)
        }
        self.port = port
    }

    deinit {
        stop()
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)/v1/")! }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Every request served so far (the log request itself excluded).
    func requests() async throws -> [LoggedRequest] {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: "http://127.0.0.1:\(port)/__log"), timeout: .seconds(60))
        let data = try await response.body.collect(upTo: 256 << 20)
        return try JSONDecoder().decode([LoggedRequest].self, from: Data(data.readableBytesView))
    }

    private static let source = #"""
        import gzip, json, os, signal, socket, sys, threading, time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        # The test process may have blocked SIGTERM in the thread that spawned us; take it back, and
        # leave on our own if the test process goes away.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        parent = os.getppid()

        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)

        threading.Thread(target=watch_parent, daemon=True).start()

        script = json.load(open(sys.argv[1]))
        log = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def head(self, status, headers, length):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(length))
                self.end_headers()

            def answer(self, status, body, headers, compress=False):
                data = body.encode("utf-8") if isinstance(body, str) else body
                if compress:
                    data = gzip.compress(data)
                    headers = dict(headers, **{"Content-Encoding": "gzip"})
                self.head(status, headers, len(data))
                self.wfile.write(data)

            def handle_any(self):
                path = self.path.split("?")[0]
                if path == "/__log":
                    with lock:
                        self.answer(200, json.dumps(log), {"Content-Type": "application/json"})
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                body = gzip.decompress(raw) if encoding == "gzip" else raw
                with lock:
                    log.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                "body": body.decode("latin-1"), "wireLength": len(raw)})
                if encoding == "gzip" and script["refuseGzip"]:
                    error = json.dumps({"code": "unsupported_encoding", "message": "send it plain"})
                    self.answer(415, error, {"Content-Type": "application/json", "Accept-Encoding": "identity"})
                    return
                if script["refuseSharedClock"] and b'"clock":' in body:
                    error = json.dumps({"code": "invalid_request", "message": "a mutation needs 'clocks'"})
                    self.answer(400, error, {"Content-Type": "application/json", "Outpost-Accepts": "shared-clock"})
                    return
                route = script["routes"].get(self.command + " " + path)
                if route is None:
                    error = json.dumps({"code": "not_found", "message": "no route " + path})
                    self.answer(404, error, {"Content-Type": "application/json"})
                    return
                time.sleep(route["delaySeconds"])
                if route["interimSeconds"] > 0:
                    try:
                        while True:
                            self.wfile.write(b"HTTP/1.1 102 Processing\r\n\r\n")
                            self.wfile.flush()
                            time.sleep(route["interimSeconds"])
                    except OSError:
                        self.close_connection = True
                        return
                headers = dict({"Content-Type": "application/json", "Outpost-Protocol-Version": "1"}, **route["headers"])
                data = route["body"].encode("utf-8")
                if route["gzip"]:
                    data = gzip.compress(data)
                    headers["Content-Encoding"] = "gzip"
                    if route["corruptGzipTrailer"]:
                        data = data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:]
                    if route["gzipCutTo"] >= 0:
                        data = data[:route["gzipCutTo"]]
                if route["cutAfterBytes"] >= 0:
                    self.head(route["status"], headers, len(data))
                    self.wfile.write(data[:route["cutAfterBytes"]])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if route["dripSeconds"] > 0:
                    self.head(route["status"], headers, len(data))
                    piece = route["dripBytes"]
                    try:
                        for start in range(0, len(data), piece):
                            self.wfile.write(data[start:start + piece])
                            self.wfile.flush()
                            time.sleep(route["dripSeconds"])
                    except OSError:
                        pass
                    return
                self.answer(route["status"], data, headers)

            do_GET = do_POST = do_PUT = do_HEAD = handle_any

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#
}
