import Foundation
import Outpost
import OutpostConflicts
import OutpostModels
import OutpostSchema
import OutpostStore

// The field-service app's workflows on `Device`: what a crew does on site, in the domain's words.
// The generic facade (`save`, `records`, `attach`, sync) is the toolkit's; these name its records.
extension Device {
    /// Opens the field-service app's store at `path` (`LocalApp.fieldService`); see
    /// `init(path:app:server:transport:policy:)`.
    public convenience init(
        path: String, server: Server? = nil, transport: (any SyncTransport)? = nil, policy: ConflictPolicy = ConflictPolicy()
    ) throws(OutpostError) {
        try self.init(path: path, app: .fieldService, server: server, transport: transport, policy: policy)
    }

    /// The member record naming `user` in `project`, once pulled or pre-synced: whom this device's user
    /// writes as. A clock-in's `member`, a comment's and a daily log's author must be the caller's own
    /// member record (the server refuses another, but from the office or a foreman recording his crew's
    /// time); nil before the project's records have arrived, or when `user` is not a member.
    public func member(for user: UUID, in project: UUID) throws(OutpostError) -> Member? {
        try records(Member.self, where: "projectID", is: .uuid(project)).first { $0.userID == user }
    }

    /// Clocks `member` (a member record: see `member(for:in:)`) in on `project`, offline or not.
    @discardableResult
    public func clockIn(
        member: UUID, project: UUID, at time: Date = Timestamp.now(), latitude: Double? = nil, longitude: Double? = nil
    ) async throws(OutpostError) -> TimeEntry {
        try await save(TimeEntry(
            projectID: project, memberID: member, kind: .clockIn, recordedAt: time, latitude: latitude,
            longitude: longitude))
    }

    /// Clocks out the member of `clockIn`, paired with it: the pair stays paired through sync even when
    /// both were made offline and the server renames them.
    @discardableResult
    public func clockOut(of clockIn: TimeEntry, at time: Date = Timestamp.now(), note: String = "") async throws(OutpostError)
        -> TimeEntry
    {
        try await save(TimeEntry(
            projectID: clockIn.projectID, memberID: clockIn.memberID, kind: .clockOut, recordedAt: time,
            clockInID: clockIn.id, note: note))
    }

    /// Attaches a photo to `issue`: the record (with its small thumbnail) syncs with structured data,
    /// the original file at `file` follows when the connection is good.
    @discardableResult
    public func attachPhoto(
        to issue: Issue, fileAt file: URL, contentType: String = "image/jpeg", thumbnail: Data? = nil,
        capturedAt: Date = Timestamp.now()
    ) async throws(OutpostError) -> MediaAttachment {
        let attachment = MediaAttachment(
            issueID: issue.id, kind: .photo, fileName: file.lastPathComponent, contentType: contentType, byteSize: 0,
            sha256: "", thumbnail: thumbnail, capturedAt: capturedAt)
        do {
            return try await store.attach(attachment, originalAt: file)
        } catch {
            throw .store(error)
        }
    }

    /// Comments on `issue` as `author`, a member record of the issue's project (see `member(for:in:)`).
    @discardableResult
    public func comment(on issue: Issue, by author: UUID, _ body: String) async throws(OutpostError) -> Comment {
        try await save(Comment(issueID: issue.id, authorID: author, body: body))
    }

    /// The asset a scanned QR tag names, if the device has it.
    public func asset(withQRCode code: String) throws(OutpostError) -> Asset? {
        do {
            return try store.asset(withQRCode: code)
        } catch {
            throw .store(error)
        }
    }

}
