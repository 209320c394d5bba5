import Foundation
import OutpostFieldService
import OutpostFieldServiceTesting
import OutpostModels
import OutpostSchema
import OutpostSync
import OutpostWire
import Testing

/// Holds the server to `schemas/sync-api.yaml`: every documented route answers, every status the
/// server gives is documented for that route, every documented status (but the overload ones) can
/// be provoked, 200 answers have the documented shape and errors carry a documented code.
@Suite("Contract: the running server matches schemas/sync-api.yaml", .fieldService)
struct ContractTests {
    /// Statuses a healthy test server never gives: overload, crashes and a full disk (`MediaDiskReserveTests`).
    static let unprovoked: Set<Int> = [429, 500, 503, 507]

    @Test("Every route, status and response shape of the document, against the running server", arguments: Backend.available)
    func serverMatchesDocument(_ backend: Backend) async throws {
        let document = try await APIDocument.load()
        #expect(document.operations.count == 20)
        let server = try await TestServer.start(backend, maximumBodyBytes: 512 * 1024)
        // An admin token for Alice: the admin API takes it, and every sync route refuses it.
        let admin = try await server.server.issueToken(for: TestServer.alice, admin: true)
        let alice = server.transport(token: TestServer.aliceToken)
        let bytes = Data("twelve bytes".utf8)
        let issue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        let attachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: bytes))
        let secondAttachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: issue.recordID, bytes: bytes))
        let bobsIssue = Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectB))
        let bobsAttachment = Sample.create(.mediaAttachment, fields: Sample.attachmentFields(issue: bobsIssue.recordID, bytes: bytes))
        _ = try await alice.push(PushRequest(mutations: [issue, attachment, secondAttachment]))
        _ = try await server.transport(token: TestServer.bobToken).push(PushRequest(mutations: [bobsIssue, bobsAttachment]))

        let json = { (value: any Encodable) in try! wireJSON(value) }
        let goodPush = json(PushRequest(mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))]))
        let tooManyMutations = json(PushRequest(mutations: (0..<501).map { _ in
            Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))
        }))
        let goodPull = json(PullRequest(cursor: nil, limit: 10))
        // A checkpoint past this history's newest change: what a device sends a server restored from an older backup.
        let lostCheckpoint = "999999.0123456789abcdef"
        let pushFromALostHistory = json(PushRequest(
            mutations: [Sample.create(.issue, fields: Sample.issueFields(project: TestServer.projectA))], checkpoint: lostCheckpoint))
        let media = { (id: UUID) in "/media/\(id.uuidString.lowercased())/upload" }
        let original = { (id: UUID) in "/media/\(id.uuidString.lowercased())" }
        let bundle = { (id: UUID) in "/projects/\(id.uuidString.lowercased())/bundle" }
        let archive = { (id: UUID) in "/admin/projects/\(id.uuidString.lowercased())/archive" }
        let members = { (id: UUID) in "/admin/projects/\(id.uuidString.lowercased())/members" }
        let member = { (project: UUID, user: UUID) in "/admin/projects/\(project.uuidString.lowercased())/members/\(user.uuidString.lowercased())" }
        let newcomer = UUID()
        // Past the admin API's 64 KiB body limit.
        let bigBody = Data(#"{"name": "\#(String(repeating: "x", count: 70_000))"}"#.utf8)
        let digest = sha256Hex(bytes)
        let chunk = ["Content-Range": "bytes 0-11/12", "Outpost-Media-SHA256": digest]

        // (document path, method) -> requests that provoke its statuses: (path, token, body, headers, versions)
        typealias Probe = (path: String, token: String?, body: Data?, headers: [String: String], versions: Bool)
        let a = TestServer.aliceToken
        let probes: [String: [Probe]] = [
            "GET /health": [("/health", nil, nil, [:], true), ("/health", nil, nil, [:], false)],
            // The probes answer plain HTTP, without the protocol headers.
            "GET /livez": [("/livez", nil, nil, [:], false)],
            "GET /metrics": [
                ("/metrics", TestServer.metricsToken, nil, [:], false), ("/metrics", nil, nil, [:], false),
                ("/metrics", a, nil, [:], false),
            ],
            "GET /readyz": [("/readyz", nil, nil, [:], false), ("/readyz", nil, nil, [:], true)],
            "POST /push": [
                ("/push", a, goodPush, [:], true), ("/push", a, Data("{".utf8), [:], true), ("/push", nil, goodPush, [:], true),
                ("/push", a, tooManyMutations, [:], true), ("/push", a, goodPush, ["Content-Encoding": "br"], true),
                ("/push", a, pushFromALostHistory, [:], true),
            ],
            "POST /push/answers": [
                ("/push/answers", a, json(PushAnswersRequest(idempotencyKeys: [UUID()])), [:], true),
                ("/push/answers", a, Data("{".utf8), [:], true), ("/push/answers", nil, json(PushAnswersRequest(idempotencyKeys: [])), [:], true),
                ("/push/answers", a, json(PushAnswersRequest(idempotencyKeys: (0...PushAnswersRequest.maximumKeys).map { _ in UUID() })), [:], true),
                ("/push/answers", a, Data(repeating: 32, count: 600 * 1024), [:], true),
                ("/push/answers", a, json(PushAnswersRequest(idempotencyKeys: [])), ["Content-Encoding": "br"], true),
            ],
            "POST /pull": [
                ("/pull", a, goodPull, [:], true), ("/pull", a, json(PullRequest(cursor: "x", limit: 1)), [:], true),
                ("/pull", a, json(PullRequest(cursor: nil, limit: 10, acceptsSharedClock: false)), [:], true),
                ("/pull", nil, goodPull, [:], true),
                ("/pull", a, json(PullRequest(cursor: nil, limit: 1, projects: [TestServer.projectB])), [:], true),
                ("/pull", a, Data(repeating: 32, count: 600 * 1024), [:], true),
                ("/pull", a, json(PullRequest(cursor: nil, limit: 10, checkpoint: lostCheckpoint)), [:], true),
            ],
            "GET /media/{attachmentID}/upload": [
                (media(attachment.recordID), a, nil, [:], true), (media(attachment.recordID), a, nil, [:], false),
                (media(attachment.recordID), nil, nil, [:], true), (media(bobsAttachment.recordID), a, nil, [:], true),
                (media(UUID()), a, nil, [:], true),
            ],
            "PUT /media/{attachmentID}/upload": [
                (media(attachment.recordID), a, bytes, chunk, true), (media(attachment.recordID), a, bytes, [:], true),
                (media(attachment.recordID), nil, bytes, chunk, true), (media(bobsAttachment.recordID), a, bytes, chunk, true),
                (media(UUID()), a, bytes, chunk, true),
                // Carol shares project A with Alice: an attachment Alice made is not hers to upload.
                (media(attachment.recordID), TestServer.carolToken, bytes, chunk, true),
                (media(secondAttachment.recordID), a, bytes.suffix(7), ["Content-Range": "bytes 5-11/12", "Outpost-Media-SHA256": digest], true),
                (media(secondAttachment.recordID), a, bytes, ["Content-Range": "bytes 0-99999999/100000000", "Outpost-Media-SHA256": digest], true),
                (media(secondAttachment.recordID), a, bytes, chunk.merging(["Content-Encoding": "gzip"]) { $1 }, true),
                (media(secondAttachment.recordID), a, bytes, ["Content-Range": "bytes 0-11/12", "Outpost-Media-SHA256": String(repeating: "0", count: 64)], true),
            ],
            // After the upload's probes (the document's order): the first PUT made Alice's file whole.
            "GET /media/{attachmentID}": [
                (original(attachment.recordID), a, nil, [:], true), (original(attachment.recordID), a, nil, ["Range": "bytes=5-"], true),
                (original(attachment.recordID), a, nil, ["Range": "bytes=12-"], true),
                (original(attachment.recordID), nil, nil, [:], true), (original(attachment.recordID), a, nil, [:], false),
                (original(bobsAttachment.recordID), a, nil, [:], true), (original(secondAttachment.recordID), a, nil, [:], true),
                (original(UUID()), a, nil, [:], true),
            ],
            "GET /projects/{projectID}/bundle": [
                (bundle(TestServer.projectA) + "?format=xml", a, nil, [:], true), (bundle(TestServer.projectA) + "?format=pdf", a, nil, [:], true),
                (bundle(TestServer.projectA), nil, nil, [:], true), (bundle(TestServer.projectB), a, nil, [:], true),
                (bundle(UUID()), a, nil, [:], true), (bundle(TestServer.projectA), admin, nil, [:], true),
            ],
            // The admin API: an admin token only (a member's is 403, none 401), no protocol headers.
            "GET /admin/log": [
                ("/admin/log?limit=5", admin, nil, [:], false), ("/admin/log?limit=0", admin, nil, [:], false),
                ("/admin/log", nil, nil, [:], false), ("/admin/log", a, nil, [:], false),
            ],
            "POST /admin/projects": [
                ("/admin/projects", admin, Data(#"{"name": "Birch Lane", "address": "1 Birch Lane"}"#.utf8), [:], false),
                ("/admin/projects", admin, Data(#"{"name": ""}"#.utf8), [:], false),
                ("/admin/projects", nil, Data(#"{"name": "x"}"#.utf8), [:], false),
                ("/admin/projects", a, Data(#"{"name": "x"}"#.utf8), [:], false),
                ("/admin/projects", admin, Data(#"{"id": "\#(TestServer.projectA)", "name": "Again"}"#.utf8), [:], false),
                ("/admin/projects", admin, bigBody, [:], false),
            ],
            "POST /admin/projects/{projectID}/archive": [
                (archive(TestServer.projectB), admin, Data(#"{"archived": false}"#.utf8), [:], false),
                (archive(TestServer.projectB), admin, Data(#"{"archived": "no"}"#.utf8), [:], false),
                (archive(TestServer.projectB), nil, Data(#"{"archived": false}"#.utf8), [:], false),
                (archive(TestServer.projectB), a, Data(#"{"archived": false}"#.utf8), [:], false),
                (archive(UUID()), admin, Data(#"{"archived": true}"#.utf8), [:], false),
                (archive(TestServer.projectB), admin, bigBody, [:], false),
            ],
            "GET /admin/projects/{projectID}/members": [
                (members(TestServer.projectA), admin, nil, [:], false), (members(TestServer.projectA), nil, nil, [:], false),
                (members(TestServer.projectA), a, nil, [:], false), (members(UUID()), admin, nil, [:], false),
            ],
            "PUT /admin/projects/{projectID}/members/{userID}": [
                (member(TestServer.projectB, newcomer), admin, Data(#"{"name": "Dana", "role": "crew"}"#.utf8), [:], false),
                (member(TestServer.projectB, newcomer), admin, Data(#"{"name": "Dana", "role": "boss"}"#.utf8), [:], false),
                (member(TestServer.projectB, newcomer), nil, Data(#"{"name": "Dana"}"#.utf8), [:], false),
                (member(TestServer.projectB, newcomer), a, Data(#"{"name": "Dana"}"#.utf8), [:], false),
                (member(UUID(), newcomer), admin, Data(#"{"name": "Dana"}"#.utf8), [:], false),
                (member(TestServer.projectB, newcomer), admin, bigBody, [:], false),
            ],
            "DELETE /admin/projects/{projectID}/members/{userID}": [
                (member(TestServer.projectB, UUID()), admin, nil, [:], false), (member(TestServer.projectB, UUID()), nil, nil, [:], false),
                (member(TestServer.projectB, UUID()), a, nil, [:], false), (member(UUID(), UUID()), admin, nil, [:], false),
            ],
            "GET /admin/tokens": [
                ("/admin/tokens?userID=\(TestServer.bob)", admin, nil, [:], false), ("/admin/tokens?userID=bob", admin, nil, [:], false),
                ("/admin/tokens", nil, nil, [:], false), ("/admin/tokens", a, nil, [:], false),
            ],
            "POST /admin/tokens": [
                ("/admin/tokens", admin, Data(#"{"userID": "\#(TestServer.bob)", "expiresInSeconds": 3600}"#.utf8), [:], false),
                ("/admin/tokens", admin, Data(#"{"userID": "\#(TestServer.bob)", "expiresInSeconds": 0}"#.utf8), [:], false),
                ("/admin/tokens", nil, Data(#"{"userID": "\#(TestServer.bob)"}"#.utf8), [:], false),
                ("/admin/tokens", a, Data(#"{"userID": "\#(TestServer.bob)"}"#.utf8), [:], false),
                ("/admin/tokens", admin, Data(#"{"userID": "\#(UUID())"}"#.utf8), [:], false),
                ("/admin/tokens", admin, bigBody, [:], false),
            ],
            "POST /admin/tokens/revoke": [
                ("/admin/tokens/revoke", admin, Data(#"{"token": "no-such-token"}"#.utf8), [:], false),
                ("/admin/tokens/revoke", admin, Data(#"{"token": "x", "userID": "\#(TestServer.bob)"}"#.utf8), [:], false),
                ("/admin/tokens/revoke", nil, Data(#"{"token": "x"}"#.utf8), [:], false),
                ("/admin/tokens/revoke", a, Data(#"{"token": "x"}"#.utf8), [:], false),
                ("/admin/tokens/revoke", admin, bigBody, [:], false),
            ],
        ]

        for operation in document.operations {
            let name = "\(operation.method) \(operation.path)"
            let requests = try #require(probes[name], "no probes for \(name): the document has a route the test does not know")
            var seen: Set<Int> = []
            for probe in requests {
                // A probe's 503 is its database check passing its 3 s deadline on a busy host (a whole run saw
                // /readyz do so beside a CPU-bound process): asked again for a minute (`TestServer.probe`).
                let answer = ["/health", "/readyz"].contains(probe.path) && probe.token == nil && probe.headers.isEmpty
                    ? try await server.probe(probe.path, versions: probe.versions)
                    : try await server.send(
                        operation.method, probe.path, token: probe.token, body: probe.body, headers: probe.headers,
                        versions: probe.versions)
                seen.insert(answer.status)
                #expect(operation.statuses.contains(answer.status), "\(name) answered \(answer.status), undocumented")
                #expect(answer.headers["outpost-protocol-version"] == "1")
                #expect(answer.headers[SyncProtocol.acceptsHeader.lowercased()] == SyncProtocol.sharedClockForm)
                if (200..<300).contains(answer.status) {
                    try checkShape(answer.body, headers: answer.headers, schema: operation.okSchema, document, name)
                } else {
                    let error = try JSONDecoder().decode(ErrorBody.self, from: answer.body)
                    #expect(document.errorCodes.contains(error.code.rawValue), "\(name): code \(error.code)")
                }
            }
            #expect(operation.statuses.subtracting(Self.unprovoked).subtracting(seen).isEmpty,
                    "\(name): documented but never provoked: \(operation.statuses.subtracting(seen).sorted())")
        }
        // The clock form is the caller's choice: shared only when asked for, and then used.
        for (accepts, expected) in [(true, true), (false, false)] {
            let body = json(PullRequest(cursor: nil, limit: 10, acceptsSharedClock: accepts))
            let answer = try await server.send("POST", "/pull", token: a, body: body)
            #expect(String(decoding: answer.body, as: UTF8.self).contains(#""clock":"#) == expected)
        }
        #expect(Set(probes.keys) == Set(document.operations.map { "\($0.method) \($0.path)" }))
        #expect(Set(ServerErrorCode.all.map(\.rawValue)) == document.errorCodes)
        await server.stop()
    }

    @Test("A route asked with a method it does not have answers 405 with Allow naming the document's methods for it; an unknown path 404")
    func methodsARouteDoesNotHave() async throws {
        let document = try await APIDocument.load()
        var documented: [String: Set<String>] = [:]
        for operation in document.operations { documented[operation.path, default: []].insert(operation.method) }
        let server = try await TestServer.start(.sqlite)
        for (path, methods) in documented.sorted(by: { $0.key < $1.key }) {
            let concrete = path.replacingOccurrences(of: #"\{[^}]+\}"#, with: UUID().uuidString.lowercased(), options: .regularExpression)
            for method in ["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "TRACE"] where !methods.contains(method) {
                // No token and no protocol headers: the method is answered first, as a prober sends it.
                let answer = try await server.send(method, concrete, versions: false)
                #expect(answer.status == 405, "\(method) \(path) answered \(answer.status)")
                let allow = Set((answer.headers["allow"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                #expect(allow == methods, "\(method) \(path): Allow \(allow.sorted()), the document says \(methods.sorted())")
                #expect(try JSONDecoder().decode(ErrorBody.self, from: answer.body).code == .methodNotAllowed)
            }
        }
        // (`/media//upload` is `/media/upload` to the router: the original's route, with a bad id.)
        for path in ["/nowhere", "/media/x/upload/more", "/projects/x/bundle/more"] {
            let answer = try await server.send("TRACE", path, versions: false)
            #expect(answer.status == 404, "TRACE \(path) answered \(answer.status)")
            #expect(answer.headers["allow"] == nil)
        }
        await server.stop()
    }

    @Test("A path written with extra slashes reaches the route the router gives it, and meets that route's method and version checks")
    func extraSlashesMeetTheRoutesChecks() async throws {
        // Sent on a raw connection: an HTTP library may tidy a path, a client that wants to slip past a check
        // does not. The router drops empty segments, so every form below reaches push, pull or a probe.
        let server = try await TestServer.start(.sqlite)
        for path in ["/pull/", "//pull", "/pull//", "//push/"] {
            let connection = try RawConnection(port: server.port)
            connection.send(
                "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nOutpost-Protocol-Version: 1\r\nOutpost-Schema-Version: 999\r\n"
                    + "Authorization: Bearer \(TestServer.aliceToken)\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            let asked = ContinuousClock.now
            let status = await connection.answerStatus()
            #expect(
                status == 400,
                "POST \(path) with schema version 999 must be refused like POST /pull; answered \(String(describing: status)) after \(ContinuousClock.now - asked)")
        }
        for path in ["/health/", "//health", "/metrics/", "/projects/x/bundle/", "//media/x//upload"] {
            let connection = try RawConnection(port: server.port)
            connection.send("TRACE \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(await connection.answerStatus() == 405, "TRACE \(path)")
        }
        await server.stop()
    }

    private func checkShape(
        _ body: Data, headers: [String: String], schema: String?, _ document: APIDocument, _ name: String
    ) throws {
        guard let schema else {
            // The bundle: a stream, JSON or XML; the metrics: Prometheus' text format.
            let types = name == "GET /metrics" ? ["text/plain; version=0.0.4"]
                : name == "GET /media/{attachmentID}" ? ["application/octet-stream"] : ["application/json", "application/xml"]
            #expect(types.contains(headers["content-type"] ?? ""), "\(name)")
            #expect(!body.isEmpty)
            return
        }
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any], "\(name)")
        try check(object, against: schema, document, name)
        // Nested arrays of documented objects: pull's changes, push's results, the admin API's lists.
        let nested: [String: String] = [
            "changes": "ServerRecord", "results": "MutationResult", "members": "AdminMember", "tokens": "AdminToken",
            "entries": "AdminLogEntry",
        ]
        for (key, itemSchema) in nested {
            for item in object[key] as? [[String: Any]] ?? [] {
                try check(item, against: itemSchema, document, name)
                // A record carries its clocks per field, or a shared clock and the others per field.
                if itemSchema == "ServerRecord" { #expect(item["clock"] != nil || item["clocks"] != nil, "\(name)") }
            }
        }
    }

    private func check(_ object: [String: Any], against schema: String, _ document: APIDocument, _ name: String) throws {
        let shape = try #require(document.schemas[schema], "\(schema) is not in the document")
        let keys = Set(object.keys)
        #expect(shape.required.isSubset(of: keys), "\(name): \(schema) lacks \(shape.required.subtracting(keys))")
        #expect(keys.isSubset(of: shape.properties), "\(name): \(schema) has undocumented \(keys.subtracting(shape.properties))")
    }
}
