import Foundation
import OutpostFieldService
import OutpostServer
import OutpostTesting
import Synchronization

/// The people and the shared project every scenario starts from: five members, all on one project,
/// each with a token. Project managers, since the scenarios change fees, which only the office may
/// (roles are tested in the server's own tests).
enum Crew {
    static let project = UUID(uuidString: "5ea10000-0000-4000-8000-000000000001")!
    static let users: [UUID] = (1...5).map { UUID(uuidString: String(format: "c0000000-0000-4000-8000-%012d", $0))! }
    static func token(of index: Int) -> String { "crew-\(index)-token" }

    static var seed: ServerSeed {
        ServerSeed(
            projects: [.init(id: project, name: "Reliability yard", address: "1 Test Lane")],
            members: users.enumerated().map {
                .init(userID: $0.element, name: "Crew \($0.offset)", role: "projectManager", projects: [project])
            },
            tokens: users.enumerated().map { .init(userID: $0.element, token: token(of: $0.offset)) })
    }

    /// The seed as `outpost serve --seed` reads it.
    static var seedJSON: Data {
        get throws { try JSONEncoder().encode(seed) }
    }
}

/// A clock the scenario moves by hand, so every write and every sync run of a seed is stamped in the
/// same order in every run of that seed (the faulty one and its fault-free reference), whatever the
/// wall clock does. It starts at the wall clock's time, so the server's drift check still holds.
final class VirtualClock: Sendable {
    private let milliseconds: Mutex<Int64>

    init(start: Date = Date()) {
        milliseconds = Mutex(Int64((start.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// The current instant.
    var now: Date {
        milliseconds.withLock { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    /// Moves on by `step` milliseconds and returns the new instant: every write gets its own.
    @discardableResult
    func advance(by step: Int64 = 1) -> Date {
        milliseconds.withLock {
            $0 += step
            return Date(timeIntervalSince1970: Double($0) / 1000)
        }
    }
}

extension SeededGenerator {
    /// A version-4 UUID drawn from the generator, so record ids repeat with the seed.
    mutating func uuid() -> UUID {
        let high = next(), low = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: high >> (8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: low >> (8 * UInt64(i)))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// A number in `0..<bound`.
    mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0)
        return Int(next() % UInt64(bound))
    }

    /// True with probability `chance`.
    mutating func chance(_ chance: Double) -> Bool {
        Double(next() >> 11) * 0x1p-53 < chance
    }

    /// One element of a non-empty array.
    mutating func pick<Element>(_ elements: [Element]) -> Element {
        elements[below(elements.count)]
    }

    /// The elements in a random order.
    mutating func shuffled<Element>(_ elements: [Element]) -> [Element] {
        var result = elements
        for i in stride(from: result.count - 1, to: 0, by: -1) {
            result.swapAt(i, below(i + 1))
        }
        return result
    }
}

/// A fresh temporary folder, removed by `remove()`.
struct ScratchFolder {
    let url: URL

    init(_ name: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-reliability-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ file: String) -> String { url.appendingPathComponent(file).path }

    /// Removes the folder, unless `OUTPOST_RELIABILITY_KEEP` is set (to look into a replayed seed's files).
    func remove() {
        if ProcessInfo.processInfo.environment["OUTPOST_RELIABILITY_KEEP"] != nil {
            FileHandle.standardError.write(Data("kept \(url.path)\n".utf8))
            return
        }
        try? FileManager.default.removeItem(at: url)
    }
}
