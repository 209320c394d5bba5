import Foundation
import GRDB
import OutpostBundles
import OutpostStore

/// One libFuzzer input: the bytes become a bundle file (`.xml` when they start with `<`, `.zip` with
/// `PK`, else `.json`) imported into a copy of a device database that already holds the example
/// project. An import may succeed or throw a `BundleError`; it must never crash (ASan and libFuzzer
/// catch that), leave the file failing `integrity_check`, or change the database when it throws.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBundleImport(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Data(bytes: start, count: count)
    let scratch = FuzzScratch.shared
    let bundle = scratch.folder.appendingPathComponent("input." + FuzzScratch.fileExtension(of: input))
    let database = scratch.folder.appendingPathComponent("device.sqlite").path
    do {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
        try FileManager.default.copyItem(atPath: scratch.template, toPath: database)
        try input.write(to: bundle)
    } catch {
        fatalError("fuzz harness: could not prepare the input: \(error)")
    }
    defer { try? FileManager.default.removeItem(at: bundle) }
    let refused: Bool
    do {
        let store = try LocalStore.open(at: database)
        do {
            try store.importBundle(at: bundle)
            refused = false
        } catch {
            refused = true
        }
    } catch {
        fatalError("fuzz harness: could not open the database copy: \(error)")
    }
    let integrity = FuzzScratch.integrity(database)
    guard integrity == "ok" else { fatalError("integrity_check after an import: \(integrity)") }
    if refused, FuzzScratch.content(database) != scratch.templateContent {
        fatalError("a refused bundle changed the database")
    }
    return 0
}

/// The process's entry point. SwiftPM links an executable target's `main` to `<Target>_main` (it
/// renames the entry point so tests can link the module), so with `-parse-as-library` there is none
/// unless the target defines it; this one hands over to libFuzzer's driver, as libFuzzer's own `main` does.
@_cdecl("BundleImportFuzzer_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        fuzzBundleImport(UnsafeRawPointer(data ?? UnsafePointer(bitPattern: 1)!), size)
    }
}

/// libFuzzer's driver (in the `-sanitize=fuzzer` runtime): parses the flags and runs `callback` per input.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The folder, the template database and its content, made once per fuzzing process.
final class FuzzScratch: Sendable {
    static let shared = FuzzScratch()

    let folder: URL
    let template: String
    let templateContent: String

    private init() {
        // In memory when the system has a tmpfs: every input copies and writes a database, and fsync on a
        // busy disk would otherwise be most of the time per input.
        let memory = URL(fileURLWithPath: "/dev/shm")
        let base = FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
        folder = base.appendingPathComponent("outpost-fuzz-\(ProcessInfo.processInfo.processIdentifier)")
        template = folder.appendingPathComponent("template.sqlite").path
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // libFuzzer ends the process with exit(); take the scratch folder (in /dev/shm: memory) along.
            atexit { try? FileManager.default.removeItem(at: FuzzScratch.shared.folder) }
            do {
                let store = try LocalStore.open(at: template)
                if let example = ProcessInfo.processInfo.environment["OUTPOST_FUZZ_EXAMPLE"] {
                    try store.importBundle(at: URL(fileURLWithPath: example))
                }
            }
            let queue = try DatabaseQueue(path: template)
            try queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try queue.close()
        } catch {
            fatalError("fuzz harness: could not make the template database: \(error)")
        }
        templateContent = Self.content(template)
    }

    static func fileExtension(of input: Data) -> String {
        let first = input.first { ![UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")].contains($0) }
        if first == UInt8(ascii: "<") || input.starts(with: [0xEF, 0xBB, 0xBF, UInt8(ascii: "<")]) { return "xml" }
        if input.starts(with: [UInt8(ascii: "P"), UInt8(ascii: "K")]) { return "zip" }
        return "json"
    }

    static func integrity(_ path: String) -> String {
        do {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            return try queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check").joined(separator: "; ") }
        } catch {
            return "unreadable: \(error)"
        }
    }

    /// Every table's rows, sorted, as text.
    static func content(_ path: String) -> String {
        do {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            return try queue.read { db in
                var lines: [String] = []
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
                for table in tables {
                    lines.append("== \(table)")
                    lines += try Row.fetchAll(db, sql: "SELECT * FROM \"\(table)\"").map(\.description).sorted()
                }
                return lines.joined(separator: "\n")
            }
        } catch {
            return "unreadable: \(error)"
        }
    }
}
