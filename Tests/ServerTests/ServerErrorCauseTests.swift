@testable import OutpostServer
import Foundation
import GRDB
import OutpostFieldServiceTesting
import Testing

/// A `ServerError` keeps the error that caused it as a value, not only as text.
@Suite(.fieldService) struct ServerErrorCauseTests {
    @Test func aDatabaseThatCannotBeOpenedKeepsSQLitesError() throws {
        // A path inside a regular file: SQLite cannot open it, whoever runs the test (root included).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-cause-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let notAFolder = folder.appendingPathComponent("plain-file")
        try Data("not a folder".utf8).write(to: notAFolder)
        let path = notAFolder.appendingPathComponent("server.sqlite").path
        let error = try #require(throws: ServerError.self) { try SQLiteStorage(path: path, assignsServerIDs: false) }
        #expect(error.code == .databaseFailure && error.path == path)
        let cause = try #require(error.underlying as? DatabaseError, "the cause is \(String(describing: error.underlying))")
        #expect(cause.resultCode == .SQLITE_CANTOPEN)
        #expect(error.message == "\(cause)", "the message keeps the cause's text")
        #expect(error.errorBody.message == "the server failed; see its log", "a client is told nothing of the cause")
    }

    @Test func aSeedThatIsNotJSONKeepsTheDecodersError() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-seed-\(UUID().uuidString).json")
        try Data("{ not json".utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let error = try #require(throws: ServerError.self) { try ServerSeed(contentsOf: url) }
        #expect(error.code == .invalidSeed)
        #expect(error.underlying is DecodingError, "the cause is \(String(describing: error.underlying))")
    }
}
