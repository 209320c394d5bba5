import Foundation
import OutpostWire
import OutpostSchema

/// How far a device has pulled each project it belongs to. One change sequence for all of a user's
/// projects lost history: a member added to a project later only got its changes newer than her
/// cursor, never the project record or anything older, and the pull still said it was complete. With
/// a position per project, a project the cursor does not name (joined since, or never asked for) is
/// read from its beginning while the others go on from where they were, so a device ends up with
/// exactly what a fresh device of the same user would hold.
///
/// Text form, opaque to clients: `<base>:<entries>`, the entries comma-separated, `<project id>` for a
/// project read up to `base` and `<project id>=<position>` for one read up to another position.
/// `base` is where the caller's own records outside any project stand. A bare number is a cursor from
/// before positions per project (protocol 1 servers until 2026-11): every project the caller belongs to
/// counts as read up to it.
struct PullCursor: Hashable, Sendable {
    /// The position of the caller's records outside any project (and of every project, in the old form).
    private(set) var base: Int64
    /// The position of each project named; nil in the old form.
    private(set) var projects: [UUID: Int64]?

    /// The most projects a cursor may name (those of one user).
    static let maximumProjects = 100_000

    /// The most projects a cursor may name beyond the caller's memberships: those it left since the
    /// cursor was written (`advanced` keeps only memberships). A device removed from more at once
    /// than this between two pulls is refused; a made-up cursor naming 100,000 projects, 16 KB of gzip,
    /// cost seconds of CPU before (attack 45 finding 2), and is now refused before it is read.
    /// As many as a device reads in one page (`PullResponse.maximumLeftProjects`).
    static let maximumLeftAtOnce = PullResponse.maximumLeftProjects

    /// How many projects `text` names, counted without reading them: one more than its commas, when
    /// it has a project part. With `memchr`: a loop over the bytes' slice cost 1.3 CPU-seconds for a
    /// 4.4 MB cursor in a debug build (unspecialized generics), the refusal as dear as the attack.
    static func projectCount(of text: String) -> Int {
        var text = text
        return text.withUTF8 { bytes in
            guard let start = bytes.baseAddress, let colon = memchr(start, Int32(UInt8(ascii: ":")), bytes.count) else { return 0 }
            let end = UnsafeRawPointer(start + bytes.count)
            var next = UnsafeRawPointer(colon) + 1
            guard next < end else { return 0 }
            var count = 1
            while let comma = memchr(next, Int32(UInt8(ascii: ",")), end - next) {
                count += 1
                next = UnsafeRawPointer(comma) + 1
            }
            return count
        }
    }

    /// Where a device that has pulled nothing stands.
    static let start = PullCursor(base: 0, projects: [:])

    private init(base: Int64, projects: [UUID: Int64]?) {
        self.base = base
        self.projects = projects
    }

    /// Reads a cursor's text; a cursor this server never wrote is a bad request.
    /// Exactly the form the API document's pattern gives (and this server writes): a position is 1 to 18
    /// digits, no sign; an entry is a UUID, with `=position` or without; no empty entry. Text the pattern
    /// refuses is refused here too, and text it admits is read (`Int64("+5")` took a sign the document
    /// does not have, and a 19-digit number overflowed).
    init(text: String) throws(ServerError) {
        var text = text
        guard let cursor = text.withUTF8({ Self.parse($0) }) else {
            throw ServerError(status: 400, .unknownCursor, "unknown cursor: pull everything again from the start without one")
        }
        self = cursor
    }

    /// The cursor in `bytes`, nil for text outside the pattern. Read byte by byte with the store's UUID
    /// parser: splitting into `String`s and `UUID(uuidString:)` (sscanf) spent 3 debug CPU-seconds on a
    /// forged cursor naming 100,000 projects (perf, attack finding 6 of stop 49).
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> PullCursor? {
        func position(_ digits: Slice<UnsafeBufferPointer<UInt8>>) -> Int64? {
            guard (1...18).contains(digits.count) else { return nil }
            var value: Int64 = 0
            for digit in digits {
                guard (0x30...0x39).contains(digit) else { return nil }
                value = value * 10 + Int64(digit - 0x30)
            }
            return value
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else {
            return position(bytes[...]).map { PullCursor(base: $0, projects: nil) }
        }
        guard let base = position(bytes[..<colon]) else { return nil }
        var projects: [UUID: Int64] = [:]
        var start = colon + 1
        guard start < bytes.count else { return PullCursor(base: base, projects: projects) }
        var entries = 0
        while true {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: ",")) ?? bytes.count
            // Ours name only the caller's projects; a forged one naming 200,000 cost 3.8 s a pull.
            // (The bound was 10,000 at first, and then a member of 10,001 projects was handed a cursor
            // this server refused.)
            entries += 1
            guard entries <= maximumProjects, end - start >= 36,
                let id = UUID(hyphenatedUTF8: UnsafeBufferPointer(rebasing: bytes[start..<(start + 36)]))
            else { return nil }
            if end - start == 36 {
                projects[id] = base
            } else {
                guard bytes[start + 36] == UInt8(ascii: "="), let at = position(bytes[(start + 37)..<end]) else { return nil }
                projects[id] = at
            }
            guard end < bytes.count else { break }
            start = end + 1
        }
        return PullCursor(base: base, projects: projects)
    }

    /// Whether `project` would be read from its beginning: a cursor of the current form that does not
    /// name it. (The old form counts every project as read up to its base.)
    func startsFresh(_ project: UUID) -> Bool {
        guard let projects else { return false }
        return projects[project] == nil
    }

    /// Reads `project` after change `sequence`, where a bundle of it was made (`startsFresh` first).
    mutating func adopt(_ project: UUID, at sequence: Int64) {
        guard startsFresh(project) else { return }
        projects?[project] = sequence
    }

    /// Reads each of `projects` (all in `memberships`) from its beginning (`PullRequest.rereadProjects`).
    /// A cursor of the old form becomes one of the current form first, every membership read up to its
    /// base, as the old form counts them.
    mutating func forget(_ projects: [UUID], memberships: Set<UUID>) {
        guard !projects.isEmpty else { return }
        if self.projects == nil { self.projects = Dictionary(uniqueKeysWithValues: memberships.map { ($0, base) }) }
        for project in projects { self.projects?[project] = nil }
    }

    /// The text a client sends back; entries in a stable order, so one position reads one way.
    var text: String {
        guard let projects else { return String(base) }
        let entries = projects.sortedByStorageText(\.key).map { id, position in
            position == base ? id.storageText : "\(id.storageText)=\(position)"
        }
        return "\(base):" + entries.joined(separator: ",")
    }

    /// The projects this cursor names that the caller has left since (`PullResponse.leftProjects`), at
    /// most `maximumLeftAtOnce` of them (a device refuses a page naming more); `untold`, the rest, stay
    /// named in the next cursor (pass them to `advanced` with the memberships) for the pages after.
    func projectsLeft(outside memberships: Set<UUID>) -> (told: [UUID], untold: Set<UUID>) {
        let left = (projects?.keys.filter { !memberships.contains($0) } ?? []).sortedByStorageText { $0 }
        return (Array(left.prefix(Self.maximumLeftAtOnce)), Set(left.dropFirst(Self.maximumLeftAtOnce)))
    }

    /// The sequence after which `project`'s changes are still to be pulled.
    func position(of project: UUID) -> Int64 {
        guard let projects else { return base }
        return projects[project] ?? 0
    }

    /// Whether it holds a position per project: every cursor this server writes does. A bare number
    /// (protocol 1, before 2026-11) does not.
    var holdsProjectPositions: Bool { projects != nil }

    /// The furthest position it names, `base` included.
    var highestPosition: Int64 { max(base, projects?.values.max() ?? base) }

    /// The lowest position among `projects` (and `base` when the caller's own records are read too).
    func lowestPosition(among projects: [UUID], includingBase: Bool) -> Int64 {
        let positions = projects.map(position(of:)) + (includingBase ? [base] : [])
        return positions.min() ?? base
    }

    /// The cursor after a page read from `projects` (and the caller's own records when `includingBase`)
    /// whose last change is `last`: every change of those up to `last` was in the page, since a page is
    /// read in sequence order across all of them, so each moves to `last` unless it already stood later.
    /// Projects not read keep their positions; only those in `memberships` are kept at all, so the
    /// cursor stays as long as the caller's projects (and a project left and joined again is read anew).
    func advanced(through last: Int64?, reading projects: [UUID], includingBase: Bool, memberships: Set<UUID>)
        -> PullCursor
    {
        var positions: [UUID: Int64] = [:]
        for project in memberships {
            // An old-form cursor names no project: those not read now count from the beginning later.
            if let position = self.projects?[project] ?? (self.projects == nil && projects.contains(project) ? base : nil) {
                positions[project] = position
            }
        }
        for project in projects {
            let position = self.position(of: project)
            positions[project] = max(position, last ?? position)
        }
        var next = PullCursor(base: base, projects: positions)
        if includingBase, let last { next.base = max(base, last) }
        return next
    }
}
