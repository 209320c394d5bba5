import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `LocalStore.collectMediaLeftovers` removes or puts back. Files a process writes before its
/// record commits carry its pid (`<id>.<pid>.partial`, `<pid>-<uuid>.<ext>` in the scratch folder), so
/// the sweep leaves a live process's alone and removes those of one that is gone.
enum MediaLeftovers {
    static func partialName(for attachment: UUID) -> String { "\(attachment.storageText).\(getpid()).partial" }

    static func scratchName(pathExtension: String) -> String {
        "\(getpid())-\(UUID().uuidString.lowercased()).\(pathExtension)"
    }

    static func collect(media: URL, scratch: URL, in db: Database) throws -> Int {
        var changed = 0
        let files = FileManager.default
        for name in (try? files.contentsOfDirectory(atPath: scratch.path)) ?? [] {
            guard let pid = pid_t(name.prefix { $0 != "-" }), ClaimOwner.processIsGone(pid) else { continue }
            if (try? files.removeItem(at: scratch.appendingPathComponent(name))) != nil { changed += 1 }
        }
        guard let names = try? files.contentsOfDirectory(atPath: media.path) else { return changed }
        let named = Dictionary(
            try Row.fetchAll(db, sql: "SELECT attachment_id, sha256 FROM media_uploads").map { ($0[0] as String, $0[1] as String) },
            uniquingKeysWith: { first, _ in first })
        let recorded = Set(try String.fetchAll(db, sql: "SELECT id FROM \(EntityTables.mediaRecords)"))
        for name in names {
            let url = media.appendingPathComponent(name)
            let parts = name.split(separator: ".")
            if name.hasSuffix(".partial") {
                // `<id>.<pid>.partial`; one without a pid is an older build's, left by a crash.
                let pid = parts.count == 3 ? pid_t(parts[1]) : nil
                if pid.map(ClaimOwner.processIsGone) ?? true, (try? files.removeItem(at: url)) != nil { changed += 1 }
            } else if name.hasSuffix(".previous"), let id = parts.first.map(String.init) {
                let current = media.appendingPathComponent(id)
                let committed = named[id]
                let currentDigest = try? LocalStore.measure(current).1
                if let committed, currentDigest != committed, (try? LocalStore.measure(url).1) == committed {
                    // The new original never committed: the record still names this one.
                    try? files.removeItem(at: current)
                    if (try? files.moveItem(at: url, to: current)) != nil { changed += 1 }
                } else if currentDigest != nil, (try? files.removeItem(at: url)) != nil {
                    changed += 1
                }
            } else if parts.count == 1, named[name] == nil, !recorded.contains(name) {
                // Moved into place by an attach whose record never committed.
                if (try? files.removeItem(at: url)) != nil { changed += 1 }
            }
        }
        return changed
    }
}

/// Set once `attach` moved its files, read after its transaction: whether a failure must put them back.
final class MovedFlag: @unchecked Sendable {
    /// Every access holds `lock`, hence `@unchecked Sendable`.
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
