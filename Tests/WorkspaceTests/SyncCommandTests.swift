@testable import OutpostStore
import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import Testing

/// `outpost sync` against `outpost serve`, both as child processes, the way the crash tests run them.
@Suite("outpost sync", .fieldService)
struct SyncCommandTests {
    static let project = UUID(uuidString: "a0000000-0000-4000-8000-00000000000a")!

    /// Starts `outpost serve` with one project and Alice's token; returns the process and its port.
    static func startServer(in folder: URL) async throws -> (Process, Int) {
        let user = "a11ce000-0000-4000-8000-000000000001"
        let seed = """
            {"projects": [{"id": "\(project.uuidString.lowercased())", "name": "Maple Street"}],
             "members": [{"userID": "\(user)", "name": "Alice", "projects": ["\(project.uuidString.lowercased())"]}],
             "tokens": [{"userID": "\(user)", "token": "alice-token"}]}
            """
        let seedFile = folder.appendingPathComponent("seed.json")
        try Data(seed.utf8).write(to: seedFile)
        let process = Process()
        process.executableURL = Outpost.executable
        process.arguments = ["serve", "--db", folder.appendingPathComponent("server.sqlite").path, "--port", "0", "--seed", seedFile.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = await ChildProcess.firstLine(of: output)
        guard let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            process.terminate()
            throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "serve printed: \(line)"])
        }
        return (process, port)
    }

    /// A new folder holding a device database with one issue queued; the caller removes the folder.
    static func deviceWithOneChange() async throws -> (folder: URL, db: String, store: LocalStore) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-sync-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let db = folder.appendingPathComponent("device.sqlite").path
        let store = try LocalStore.open(at: db)
        try await store.save(Issue(projectID: project, title: "Cracked sill"))
        return (folder, db, store)
    }

    @Test func aRunSendsTheQueueAndAnUnreachableServerLeavesItQueued() async throws {
        let (folder, db, _) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }

        // No server yet: exit 2, the change still waits.
        let offline = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:9", "--token", "alice-token"])
        #expect(offline.status == 2, "\(offline.output)\(offline.errorOutput)")
        #expect(try LocalStore.open(at: db).status().pendingChanges == 1)
        // What waits can be listed, and printed whole to hand over.
        let unsent = try await Outpost.run(["unsent", "--db", db])
        #expect(unsent.output.hasPrefix("1 unsent change\n"), "\(unsent.output)\(unsent.errorOutput)")
        let whole = try await Outpost.run(["unsent", "--db", db, "--json"])
        let changes = try #require(try JSONSerialization.jsonObject(with: Data(whole.output.utf8)) as? [[String: Any]])
        #expect(changes.count == 1 && (changes.first?["fields"] as? [String: Any])?.isEmpty == false)

        let (server, port) = try await Self.startServer(in: folder)
        defer { server.terminate() }
        let online = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:\(port)", "--token", "alice-token", "--json"])
        #expect(online.status == 0, "\(online.output)\(online.errorOutput)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(online.output.utf8)) as? [String: String])
        #expect(report["pushed"] == "1")
        #expect(report["pendingChanges"] == "0")

        let refused = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:\(port)", "--token", "wrong"])
        #expect(refused.status == 2)
        #expect(refused.output.contains("paused: credentialsRejected"))
    }

    /// A script that asks for JSON reads JSON when the run fails too: a run that ended on a thrown error
    /// (a store that cannot be opened or written) printed only "Error: ..." to stderr, and nothing to parse.
    @Test func aFailedRunStillPrintsItsReportAsJSON() async throws {
        let folder = try TemporaryFolder()
        let missing = folder.file("none.sqlite")
        let run = try await Outpost.run(["sync", "--db", missing, "--server", "http://127.0.0.1:9", "--token", "t", "--json"])
        #expect(run.status == 1, "\(run.output)\(run.errorOutput)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: String], "\(run.output)")
        #expect(report["complete"] == "false")
        #expect(report["error"]?.contains("no database file here") == true, "\(run.output)")
        #expect(run.errorOutput.contains("no database file here"), "the message still goes to stderr for a person")
        #expect(!FileManager.default.fileExists(atPath: missing), "a failed run creates no database")
    }

    /// `outpost sync` sweeps as `Device.sync` does (attack round 50: three runs left a stored file no record
    /// named, and one whose record the server never had): a digest no record names goes, anything else stays.
    @Test func aRunRemovesStoredFilesNoRecordNames() async throws {
        let (folder, db, _) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, port) = try await Self.startServer(in: folder)
        defer { server.terminate() }
        let files = URL(fileURLWithPath: db + ".files")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        let unnamed = files.appendingPathComponent(String(repeating: "ab", count: 32))
        let byHand = files.appendingPathComponent("notes.txt")
        try Data("planted".utf8).write(to: unnamed)
        try Data("mine".utf8).write(to: byHand)

        let run = try await Outpost.run(["sync", "--db", db, "--server", "http://127.0.0.1:\(port)", "--token", "alice-token", "--json"])
        #expect(run.status == 0, "\(run.output)\(run.errorOutput)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: String])
        #expect(report["filesRemoved"] == "1", "\(run.output)")
        #expect(!FileManager.default.fileExists(atPath: unnamed.path))
        #expect(FileManager.default.fileExists(atPath: byHand.path))
    }

    @Test("outpost presync imports a project's bundle; the next outpost sync pulls none of it again; a project the token does not reach is refused")
    func presyncThenSyncPullsNothingTwice() async throws {
        let (folder, db, _) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (server, port) = try await Self.startServer(in: folder)
        defer { server.terminate() }
        let url = "http://127.0.0.1:\(port)"
        #expect(try await Outpost.run(["sync", "--db", db, "--server", url, "--token", "alice-token"]).status == 0)

        let fresh = folder.appendingPathComponent("fresh.sqlite").path
        let presync = try await Outpost.run([
            "presync", "--db", fresh, "--server", url, "--token", "alice-token", "--project", Self.project.uuidString,
        ])
        #expect(presync.status == 0, "\(presync.output)\(presync.errorOutput)")
        #expect(presync.output.contains("the next sync pulls only what changed after this bundle"), "\(presync.output)")
        let first = try await Outpost.run(["sync", "--db", fresh, "--server", url, "--token", "alice-token", "--json"])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(first.output.utf8)) as? [String: String])
        #expect(report["pulled"] == "0", "\(first.output)")
        #expect(try LocalStore.open(at: fresh).fetchAll(Issue.self, where: "projectID", equals: .uuid(Self.project)).count == 1)

        let refused = try await Outpost.run([
            "presync", "--db", fresh, "--server", url, "--token", "alice-token", "--project", UUID().uuidString,
        ])
        #expect(refused.status == 1 && refused.errorOutput.contains("not_found"), "\(refused.errorOutput)")
    }

    @Test func retryFailedSendsAFailedChangeAgain() async throws {
        let (folder, db, store) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The change failed (its retries ran out in a long outage, say).
        let claimed = try #require(try store.claimMutations(limit: 1, now: Date()).first)
        try store.fail(claimed, reason: "timed out 11 times")
        let (server, port) = try await Self.startServer(in: folder)
        defer { server.terminate() }
        let url = "http://127.0.0.1:\(port)"
        let plain = try await Outpost.run(["sync", "--db", db, "--server", url, "--token", "alice-token", "--json"])
        let before = try #require(try JSONSerialization.jsonObject(with: Data(plain.output.utf8)) as? [String: String])
        #expect(before["pushed"] == "0", "a failed change stays failed until asked")
        #expect(try LocalStore.open(at: db).status().failedChanges == 1)

        let retried = try await Outpost.run(["sync", "--db", db, "--server", url, "--token", "alice-token", "--retry-failed", "--json"])
        #expect(retried.status == 0, "\(retried.output)\(retried.errorOutput)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(retried.output.utf8)) as? [String: String])
        #expect(report["retriedFailed"] == "1")
        #expect(report["pushed"] == "1")
        #expect(try LocalStore.open(at: db).status().failedChanges == 0)
    }

    /// Text a server wrote reaches the terminal on its one line, escaped: a server's error message was
    /// printed raw in `outpost sync`'s "last transport error" line and a refusal's reason in `outpost
    /// unsent`, so an escape sequence cleared the screen and retitled the window, and a carriage return
    /// or newline forged a "sync complete: 0 pending" line (attack 114, F6). `conflicts list` escaped it.
    @Test("Text a server wrote is printed on its own line with its control and direction characters escaped")
    func serverTextIsPrintedEscaped() async throws {
        let (folder, db, store) = try await Self.deviceWithOneChange()
        defer { try? FileManager.default.removeItem(at: folder) }
        let evil = "x\u{1B}[2J\u{1B}]0;owned\u{07}\rsync complete: 0 pending\nFAKE LINE\u{202E}live\u{2028}sep"
        func expectEscaped(_ printed: String, _ command: String) {
            let raw: Set<UInt32> = [0x1B, 0x07, 0x0D, 0x202E, 0x2028]
            #expect(!printed.unicodeScalars.contains { raw.contains($0.value) }, "\(command): \(printed.debugDescription)")
            #expect(!printed.contains("\nFAKE LINE"), "\(command) printed a line the server wrote: \(printed.debugDescription)")
            #expect(printed.contains("\\u{1B}[2J"), "\(command) shows the text, escaped: \(printed.debugDescription)")
        }
        // A refusal's reason, as a server gave it.
        let claimed = try #require(try store.claimMutations(limit: 1, now: Date()).first)
        try store.fail(claimed, reason: "invalid_request: " + evil)
        let unsent = try await Outpost.run(["unsent", "--db", db])
        expectEscaped(unsent.output + unsent.errorOutput, "outpost unsent")
        // An error's message, from a server that answers every request 500.
        let script = """
            import http.server, json, os, socketserver, subprocess, sys, threading
            outpost, folder = sys.argv[1], sys.argv[2]
            body = json.dumps({"code": "internal", "message": \(String(decoding: try JSONEncoder().encode(evil), as: UTF8.self))}).encode()
            class Handler(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *args): pass
                def do_POST(self):
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self.send_response(500)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Outpost-Protocol-Version", "1")
                    self.end_headers()
                    self.wfile.write(body)
                do_GET = do_POST
            server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            with open(os.path.join(folder, "sync.out"), "w") as out:
                child = subprocess.Popen([outpost, "sync", "--db", os.path.join(folder, "device.sqlite"), "--retry-failed",
                    "--server", "http://127.0.0.1:%d" % server.server_address[1], "--token", "t"], stdout=out, stderr=out)
                _, status, usage = os.wait4(child.pid, 0)
            server.shutdown()
            print(json.dumps({"sync": {"status": os.waitstatus_to_exitcode(status), "peakKB": usage.ru_maxrss,
                                       "output": open(os.path.join(folder, "sync.out"), encoding="utf-8", errors="replace").read()}}))
            """
        let sync = try #require(try await OutpostScript.runs(script, folder: folder)["sync"])
        #expect(sync.output.contains("last transport error"), "\(sync.output)")
        expectEscaped(sync.output, "outpost sync")
    }

    /// A server's answer is bounded while it arrives: a pull answered with 2.3 MB of gzip that inflates to
    /// 512 MB took `outpost sync` to 1,086 MB before it was refused, when the client inflated whole
    /// bodies. Judged by memory, not time: the peak (`wait4`'s `ru_maxrss`) of a sync against that bomb
    /// and of one against a server with nothing to send, both from a Python server on 127.0.0.1.
    @Test("A pull answered with a 512 MB gzip bomb is refused, and the sync peaks under 100 MB above an idle one")
    func aGzipBombIsRefusedWithMemoryBounded() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bomb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for name in ["idle", "bomb"] {
            #expect(try await Outpost.run(["migrate", "--db", folder.appendingPathComponent("\(name).sqlite").path]).status == 0)
        }
        let script = """
            import http.server, json, os, socketserver, subprocess, sys, threading, zlib
            outpost, folder = sys.argv[1], sys.argv[2]
            compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
            parts = [compressor.compress(b'{"changes":[],"hasMore":false,"nextCursor":"')]
            block = b"a" * (1 << 20)
            parts += [compressor.compress(block) for _ in range(512)]
            bomb = b"".join(parts + [compressor.compress(b'"}'), compressor.flush()])
            idle = json.dumps({"changes": [], "nextCursor": "0:", "hasMore": False}).encode()
            class Handler(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *args): pass
                def do_POST(self):
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    body = bomb if self.server.bomb else idle
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if self.server.bomb: self.send_header("Content-Encoding", "gzip")
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Outpost-Protocol-Version", "1")
                    self.end_headers()
                    try: self.wfile.write(body)
                    except Exception: pass
                do_GET = do_POST
            result = {}
            for name in ["idle", "bomb"]:
                server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
                server.bomb = name == "bomb"
                threading.Thread(target=server.serve_forever, daemon=True).start()
                with open(os.path.join(folder, name + ".out"), "w") as out:
                    child = subprocess.Popen([outpost, "sync", "--db", os.path.join(folder, name + ".sqlite"),
                        "--server", "http://127.0.0.1:%d" % server.server_address[1], "--token", "t"], stdout=out, stderr=out)
                    _, status, usage = os.wait4(child.pid, 0)
                server.shutdown()
                result[name] = {"status": os.waitstatus_to_exitcode(status), "peakKB": usage.ru_maxrss,
                                "output": open(os.path.join(folder, name + ".out")).read()}
            print(json.dumps(result))
            """
        let runs = try await OutpostScript.runs(script, folder: folder)
        let idle = try #require(runs["idle"]), bomb = try #require(runs["bomb"])
        #expect(idle.status == 0, "\(idle.output)")
        #expect(bomb.status == 2, "the sync could not finish: \(bomb.output)")
        #expect(bomb.output.contains("larger than"), "refused for its size: \(bomb.output)")
        #expect(bomb.peakKB - idle.peakKB < 100 * 1024, "peak \(bomb.peakKB) KB against \(idle.peakKB) KB idle")
    }
}
