import ArgumentParser
import Foundation
import Outpost
import OutpostFieldService
import OutpostModels

/// `outpost originals`: a teammate's original files, as a device fetches them (`Device.original(of:)`).
struct OriginalsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "originals",
        abstract: "Download the original file of an attachment, or of every attachment of a project, into the device's cache.",
        discussion: """
            The database must have pulled the attachment records (outpost sync). Each file is checked against \
            its record's SHA-256 before it is kept in <db>.originals/; a download cut off resumes at the next \
            run. Prints each file's path, or with --project what it downloaded, held already, left over the \
            budget (the project's newest originals that fit are kept, older ones evicted for them) and could \
            not get yet (a teammate's upload not finished, or an attachment the server no longer shows this \
            device: sync). Exits 1 when the server's bytes are not the record's or its answer is broken, and \
            with --attachment also when the server refuses it (not a member, not uploaded yet) or the \
            device holds no such attachment. A lowered --cache-bytes is kept from this run on.
            """
    )

    @OptionGroup var device: DeviceOptions

    @Option(help: "The attachment whose original to fetch.")
    var attachment: String?

    @Option(help: "Fetch every original of this project the device does not hold yet, within the cache budget.")
    var project: String?

    @Option(help: "The most bytes of downloaded originals the device keeps.")
    var cacheBytes: Int64 = 256 << 20

    func run() async throws {
        let url = try self.device.serverURL()
        guard (attachment == nil) != (project == nil) else {
            throw CommandFailure("name one of --attachment ID or --project ID")
        }
        let db = self.device.db
        guard FileManager.default.fileExists(atPath: db) else { throw CommandFailure("\(db): no database file here") }
        do {
            let device = try Device(
                path: db, app: .fieldService,
                server: .init(url: url, token: self.device.token, allowsPlainHTTP: self.device.allowPlainHttp),
                originalsCacheBytes: cacheBytes)
            if let attachment {
                guard let id = UUID(uuidString: attachment) else { throw CommandFailure("--attachment: \(attachment) is not a UUID") }
                guard let record = try device.fetch(MediaAttachment.self, id: id) else {
                    throw CommandFailure("no attachment \(attachment) on this device; sync first")
                }
                print(try await device.original(of: record).path)
            } else if let project {
                guard let id = UUID(uuidString: project) else { throw CommandFailure("--project: \(project) is not a UUID") }
                let summary = try await device.downloadOriginals(ofProject: id)
                print("downloaded \(summary.downloaded) (\(summary.bytesReceived) bytes), held already \(summary.alreadyHeld), left over the budget \(summary.leftOverBudget), not available yet \(summary.unavailable)")
                // A file whose bytes are not its record's is the server's fault: said, and exit 1 as for
                // one attachment (it exited 0 with nothing said; attack 101, F5).
                if summary.refused > 0 {
                    throw CommandFailure(
                        "refused \(summary.refused) original(s) the server gave with bytes that do not match their record's SHA-256 or with a broken answer; nothing of them was kept, and the next run asks again")
                }
            }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
