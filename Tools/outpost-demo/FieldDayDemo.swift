import Foundation
import Outpost
import OutpostFieldService
import OutpostModels
import OutpostSchema
import OutpostServer
// Beyond what an app imports: the demo checks its claims against the server's own state.
import OutpostStore
import OutpostSync
import OutpostWire

/// `make demo`: a reference server on 127.0.0.1 with a seeded project, and two crew devices (two local
/// store files) walked through a field day, in plain words. Every claim it prints is checked; the
/// process exits non-zero when one does not hold.
@main
struct FieldDayDemo {
    static let project = UUID(uuidString: "3a7e0000-0000-4000-8000-000000000001")!
    static let alice = UUID(uuidString: "a11ce000-0000-4000-8000-000000000001")!
    static let bob = UUID(uuidString: "b0b00000-0000-4000-8000-000000000002")!
    static let carol = UUID(uuidString: "ca201000-0000-4000-8000-000000000003")!
    static let tokens = [alice: "alice-demo-token", bob: "bob-demo-token", carol: "carol-demo-token"]

    static func main() async {
        var demo = Checks()
        do {
            // The demo is a field-service app's day: its schema is this process's.
            try EntityCatalog.install(EntityCatalog.fieldService)
            try await run(&demo)
        } catch {
            demo.fail("the demo stopped: \(error)")
        }
        print()
        if demo.failures.isEmpty {
            print("Demo passed: \(demo.passed) checks held.")
        } else {
            print("Demo FAILED: \(demo.failures.count) of \(demo.passed + demo.failures.count) checks did not hold:")
            for failure in demo.failures { print("  - \(failure)") }
            exit(1)
        }
    }

    static func run(_ demo: inout Checks) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        // The server: its own integer ids, so the devices' temporary ids really get replaced.
        section("The server")
        let server = try SyncServer(
            configuration: ServerConfiguration(
                databasePath: folder.appendingPathComponent("server.sqlite").path, port: 0, assignsServerIDs: true,
                logLevel: "critical"))
        try await server.load(ServerSeed(
            projects: [.init(id: project, name: "Maple Street kitchen", address: "12 Maple Street")],
            members: [
                .init(userID: alice, name: "Alice", role: "foreman", projects: [project]),
                .init(userID: bob, name: "Bob", role: "crew", projects: [project]),
                .init(userID: carol, name: "Carol", role: "projectManager", projects: [project]),
            ],
            tokens: tokens.map { .init(userID: $0.key, token: $0.value) }))
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let serverTask = Task { try await server.run(handlingSignals: false) { portContinuation.yield($0) } }
        defer { serverTask.cancel() }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next() else { throw DemoError("the server did not start") }
        let url = URL(string: "http://127.0.0.1:\(port)")!
        say("Listening on \(url), assigning its own integer ids; project \"Maple Street kitchen\" with")
        say("Alice (foreman), Bob (crew) and Carol (project manager, in the office).")

        func device(_ name: String, _ member: UUID) throws -> Device {
            try Device(path: folder.appendingPathComponent("\(name).sqlite").path, server: .init(url: url, token: tokens[member]!))
        }
        let office = try device("office", carol)
        let a = try device("alice", alice)
        let b = try device("bob", bob)

        section("The day before")
        // Who each user writes as: their member record in the project (the server refuses a comment, log
        // or clock-in that names someone else, but from the office or a foreman for his crew's time).
        try await office.sync()
        // A daily log is its author's: the office writes one for Alice, and only she, or the office, changes it.
        let aliceInProject = try demo.require(try office.member(for: alice, in: project), "the office has Alice's member record")
        let stain = try await office.save(Issue(projectID: project, title: "Water stain on the ceiling", details: "Above the sink"))
        let log = try await office.save(DailyLog(projectID: project, authorID: aliceInProject.id, day: "2026-11-23", notes: "Cabinets arrive"))
        try await office.sync()
        say("Carol raises \"\(stain.title)\" and starts tomorrow's daily log for Alice from the office, and syncs.")
        for (name, crew) in [("Alice", a), ("Bob", b)] {
            let summary = try await crew.preSync(project: project)
            say("\(name)'s device pre-syncs the project bundle: \(summary.total.inserted) records imported.")
            demo.check(try crew.fetch(Issue.self, id: stain.id) != nil, "\(name) has the issue after pre-sync")
            try await crew.sync()
        }

        section("On site, no signal")
        let aliceMember = try demo.require(try a.member(for: alice, in: project), "Alice's device has her member record")
        let clockIn = try await a.clockIn(member: aliceMember.id, project: project)
        say("Alice clocks in.")
        var aliceLog = try demo.require(try a.fetch(DailyLog.self, id: log.id), "Alice has the daily log")
        aliceLog.notes = "Cabinets arrived; demo of the old counters done"
        try await a.save(aliceLog)
        say("Alice writes the daily log's notes.")
        let opportunity = try await a.save(Opportunity(name: "Silva bathroom", customerName: "Ana Silva"))
        let remodel = try await a.save(Project(opportunityID: opportunity.id, name: "Silva bathroom remodel"))
        let scope = try await a.save(Scope(projectID: remodel.id, name: "Tiling"))
        let tiles = try await a.save(ScopeItem(scopeID: scope.id, name: "Porcelain floor tile", quantity: 12, unit: "m2", unitPriceCents: 6_500))
        let labour = try await a.save(ScopeItem(scopeID: scope.id, name: "Tiling labour", quantity: 16, unit: "h", unitPriceCents: 5_500))
        let discount = try await a.save(Discount(projectID: remodel.id, name: "Returning customer", kind: .percentage, value: 500))
        let fee = try await a.save(Fee(projectID: remodel.id, name: "Disposal", amountCents: 15_000))
        say("Alice builds an estimate: opportunity → project → scope → 2 items, a discount and a fee.")
        let crack = try await a.save(Issue(projectID: project, title: "Cracked floor tile", details: "By the dishwasher", priority: .high))
        let photoFile = folder.appendingPathComponent("IMG_2041.jpg")
        var generator = SystemRandomNumberGenerator()
        let photoBytes = Data((0..<180_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try photoBytes.write(to: photoFile)
        let photo = try await a.attachPhoto(to: crack, fileAt: photoFile)
        say("Alice raises \"\(crack.title)\" with a photo (\(photo.byteSize / 1024) KB).")
        var aliceStain = try demo.require(try a.fetch(Issue.self, id: stain.id), "Alice has the stain issue")
        aliceStain.status = .resolved
        try await a.save(aliceStain)
        say("Alice marks \"\(stain.title)\" resolved.")

        let clockOut = try await a.clockOut(of: clockIn, note: "Left at 4 pm")
        say("Alice clocks out; the clock-out names its clock-in, both still temporary ids.")

        // Two devices' writes in the same millisecond are concurrent: the hybrid clock orders them by
        // counter, then node, not by which came later. Bob's change comes "a little later"; the pause
        // makes sure of it.
        try await Task.sleep(for: .milliseconds(5))
        var bobStain = try demo.require(try b.fetch(Issue.self, id: stain.id), "Bob has the stain issue")
        bobStain.status = .inProgress
        try await b.save(bobStain)
        say("Bob, a little later, marks the same issue in progress.")
        var officeLog = try demo.require(try office.fetch(DailyLog.self, id: log.id), "the office has the daily log")
        officeLog.weather = "Rain after 2 pm"
        try await office.save(officeLog)
        say("In the office, Carol fills in the same daily log's weather from the forecast.")
        let aliceWaiting = try await a.status()
        say("Waiting on Alice's device: \(aliceWaiting.pendingChanges) changes and \(aliceWaiting.pendingMediaUploads) photo; on Bob's: \(try await b.status().pendingChanges) changes.")

        section("Back online")
        let bobReport = try await b.sync()
        say("Bob syncs: \(bobReport.pushed) changes sent.")
        let officeReport = try await office.sync()
        say("The office syncs: \(officeReport.pushed) change sent.")
        let aliceReport = try await a.sync(conditions: SyncConditions(mediaRequested: true))
        say("Alice syncs: \(aliceReport.pulled) changes pulled, \(aliceReport.pushed) sent, then \(aliceReport.mediaUploaded) photo uploaded (\(aliceReport.mediaBytesUploaded / 1024) KB), \(aliceReport.conflictsSurfaced) conflict surfaced.")
        demo.check(aliceReport.mediaUploaded == 1, "the photo was uploaded")

        say("Server ids that replaced Alice's temporary ids:")
        for (entity, id, label) in [
            (EntityType.opportunity, opportunity.id, "opportunity"), (.project, remodel.id, "project"), (.scope, scope.id, "scope"),
            (.scopeItem, tiles.id, "item"), (.scopeItem, labour.id, "item"), (.discount, discount.id, "discount"),
            (.fee, fee.id, "fee"), (.timeEntry, clockIn.id, "clock-in"), (.timeEntry, clockOut.id, "clock-out"),
            (.issue, crack.id, "issue"),
            (.mediaAttachment, photo.id, "photo"),
        ] {
            let serverID = try a.store.serverID(of: entity, clientID: id)
            demo.check(serverID != nil, "\(label) \(id) got a server id")
            say("  \(label.padding(toLength: 12, withPad: " ", startingAt: 0)) \(id.uuidString.lowercased()) → \(serverID ?? "none")")
        }

        let uploadedPhoto = try a.fetch(MediaAttachment.self, id: photo.id)
        demo.check((uploadedPhoto?.sync.version ?? 0) > 0 && aliceReport.pushCompleted,
                   "the photo's record and every structured change were acknowledged before its file went up")
        say("Structured data first: every change, the photo's record included, was acknowledged before the file was sent.")

        let merged = try a.fetch(DailyLog.self, id: log.id)
        demo.check(merged?.notes == aliceLog.notes && merged?.weather == officeLog.weather, "the daily log merged field by field")
        say("The daily log merged field by field: notes from Alice (\"\(merged?.notes ?? "")\"), weather from the office (\"\(merged?.weather ?? "")\").")

        let conflicts = try a.openConflicts()
        demo.check(conflicts.count == 1 && conflicts.first?.field == "status", "Alice's losing status is surfaced as a conflict")
        demo.check(conflicts.first?.losingSide == .client, "Alice's status, the older change, is the one that lost")
        if let conflict = conflicts.first {
            say("Conflict on Alice's device: \(conflict.entity.rawValue) \"\(stain.title)\", field \(conflict.field ?? "(\(conflict.kind.rawValue))"): hers \(conflict.localValue.map(describe) ?? "-"), the server's \(conflict.remoteValue.map(describe) ?? "-"); \(conflict.losingSide == .server ? "the server's" : "hers") lost. She can override or discard.")
            try await a.resolve(conflict, choice: .override)
            say("Alice chooses override: the losing value, \(conflict.losingValue.map(describe) ?? "-"), goes out again as a new change.")
        }

        section("End of the day")
        for (name, crew) in [("Alice", a), ("Bob", b), ("the office", office)] {
            let report = try await crew.sync()
            demo.check(report.isComplete, "\(name)'s final sync completed")
        }
        try await b.sync()
        demo.check(try b.fetch(Issue.self, id: stain.id)?.status == .resolved, "Bob now sees Alice's override")
        say("Bob's device now shows \"\(stain.title)\" as \(try b.fetch(Issue.self, id: stain.id)?.status.rawValue ?? "?").")
        let bobsCopy = try await b.original(of: photo)
        demo.check(try Data(contentsOf: bobsCopy) == photoBytes, "Bob opens Alice's original photo, whole and checked")
        say("Bob opens Alice's photo: the original (\(photoBytes.count / 1024) KB) downloaded, checked against its record's SHA-256, cached on his device.")

        for (name, crew) in [("Alice", a), ("Bob", b)] {
            let audit = try crew.store.verifyAudit()
            demo.check(audit.isIntact, "\(name)'s audit chain is intact")
            say("\(name)'s audit chain: \(audit.entriesChecked) entries verified\(audit.isIntact ? "" : ", BROKEN at \(audit.firstBrokenEntry ?? 0)").")
            let token = tokens[name == "Alice" ? alice : bob]!
            let compared = try await compare(crew.store, withServerAt: url, token: token, &demo, name: name)
            say("\(name)'s device equals the server for all \(compared) records \(name) may see.")
        }
    }

    /// Pulls everything the member may see and checks the device holds each record at the same version
    /// with the same values (references compared through the device's server-id mapping).
    static func compare(_ store: LocalStore, withServerAt url: URL, token: String, _ demo: inout Checks, name: String) async throws -> Int {
        let transport = HTTPTransport(configuration: .init(baseURL: url, schemaVersion: LocalSchema.latestVersion), token: token)
        var cursor: String?
        var count = 0
        var mismatches: [String] = []
        repeat {
            let page = try await transport.pull(PullRequest(cursor: cursor, limit: 500))
            for record in page.changes {
                count += 1
                guard let local = try store.record(record.entity, id: record.recordID) else {
                    // A device stores nothing for the tombstone of a record it never held.
                    if !record.isDeleted { mismatches.append("\(record.entity.rawValue) \(record.recordID) is missing") }
                    continue
                }
                if local.sync.version != record.version || local.sync.isDeleted != record.isDeleted {
                    mismatches.append("\(record.entity.rawValue) \(record.recordID): version \(local.sync.version) vs \(record.version)")
                    continue
                }
                let references = Dictionary(uniqueKeysWithValues: record.entity.description.parents.map { ($0.field, $0.entity) })
                for (field, serverValue) in record.fields {
                    let localValue = local[field]
                    if localValue == serverValue { continue }
                    if case .text(let serverID) = serverValue, case .uuid(let clientID) = localValue, let parent = references[field],
                        try store.serverID(of: parent, clientID: clientID) == serverID
                    {
                        continue
                    }
                    mismatches.append("\(record.entity.rawValue) \(record.recordID).\(field): \(localValue) vs \(serverValue)")
                }
            }
            cursor = page.nextCursor
            if !page.hasMore { break }
        } while true
        demo.check(mismatches.isEmpty, "\(name)'s device equals the server" + (mismatches.isEmpty ? "" : ": " + mismatches.prefix(5).joined(separator: "; ")))
        return count
    }

    static func describe(_ value: FieldValue) -> String {
        if case .text(let text) = value { return "\"\(text)\"" }
        return "\(value)"
    }

    static func section(_ title: String) {
        print()
        print("== \(title)")
    }

    static func say(_ line: String) {
        print(line)
    }
}

/// What the demo claims, and which claims did not hold.
struct Checks {
    var passed = 0
    var failures: [String] = []

    mutating func check(_ condition: @autoclosure () throws -> Bool, _ claim: String) {
        if (try? condition()) == true { passed += 1 } else { failures.append(claim) }
    }

    mutating func require<T>(_ value: @autoclosure () throws -> T?, _ claim: String) throws -> T {
        guard let value = try value() else {
            failures.append(claim)
            throw DemoError(claim)
        }
        passed += 1
        return value
    }

    mutating func fail(_ message: String) {
        failures.append(message)
    }
}

struct DemoError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
