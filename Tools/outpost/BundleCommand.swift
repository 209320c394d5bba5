import ArgumentParser
import Foundation
import OutpostBundles
import OutpostFieldService
import OutpostSchema
import OutpostStore
import OutpostWire

/// `outpost bundle`: check and write pre-sync bundles.
struct BundleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bundle",
        abstract: "Validate or export pre-sync bundles (XML or JSON, alone or zipped with their files).",
        subcommands: [BundleValidateCommand.self, BundleExportCommand.self]
    )
}

/// `outpost bundle validate PATH`: exit 0 when the bundle is valid, 1 with located errors otherwise.
struct BundleValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a bundle against its schema and the entity catalog's rules, without a database.",
        discussion: "Prints each error with its place (line and column, JSON path or zip entry) and exits 1; prints 'valid' and exits 0 otherwise."
    )

    @Argument(help: "The bundle: a .xml, .json or .zip file.")
    var path: String

    func run() throws {
        let errors = BundleValidator().errors(inBundleAt: URL(fileURLWithPath: path))
        guard errors.isEmpty else {
            for error in errors { FileHandle.standardError.write(Data((OneLineText.escaping("\(error)") + "\n").utf8)) }
            throw CommandFailure("\(path): \(errors.count) error\(errors.count == 1 ? "" : "s")")
        }
        print("\(path): valid")
    }
}

/// `outpost bundle export`: one project's records as a bundle, as the server serves it for pre-sync.
struct BundleExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write one project and every record under it as a bundle."
    )

    @Option(help: "The database file.")
    var db: String

    @Option(help: "The project's id.")
    var project: String

    @Option(help: "xml or json.")
    var format: String = "xml"

    @Option(help: "The bundle file to write; a name ending in .zip writes a zip with the manifest and the files its records name.")
    var out: String

    func run() throws {
        guard let projectID = UUID(uuidString: project) else { throw ValidationError("--project must be a UUID") }
        guard let bundleFormat = BundleFormat(rawValue: format) else { throw ValidationError("--format must be xml or json") }
        guard FileManager.default.fileExists(atPath: db) else { throw CommandFailure("\(db): no database file here") }
        do {
            let store = try LocalStore.open(at: db)
            let destination = URL(fileURLWithPath: out)
            guard destination.pathExtension.lowercased() == "zip" else {
                let count = try store.exportBundle(project: projectID, format: bundleFormat, to: destination)
                print("wrote \(count) records to \(out)")
                return
            }
            let summary = try store.exportArchive(project: projectID, format: bundleFormat, to: destination)
            print("wrote \(summary.records) records and \(summary.files) files to \(out)")
            if !summary.missingFiles.isEmpty {
                print("not on this device, so not in the archive (\(summary.missingFiles.count)): \(summary.missingFiles.joined(separator: ", "))")
            }
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
