import Foundation
import Outpost

// The contractor job app's schema: a job is what a crew is given (the scope of access and sync), crew
// records grant roles on it, notes and videos hang from it. Everything the toolkit needs is here. The
// models are the app's own (internal, as in an app target); the schema and steps are public for its
// server and its tests.

/// A job: the scope. Its creator leads it.
struct Job: Syncable {
    enum Status: String, Codable, Sendable, CaseIterable { case open, inProgress, done }
    static let entityType = EntityType(declaring: "job")
    static let fieldTable = FieldTable<Job>(\.name, \.address, \.status, \.dueDay)
    var id: UUID = .timeOrdered()
    var sync = SyncMetadata(createdAt: Date())
    var name: String
    var address = ""
    var status = Status.open
    var dueDay: String?
    init(name: String, address: String = "") { (self.name, self.address) = (name, address) }
}

/// A person's role on a job: the membership entity.
struct CrewMember: Syncable {
    static let entityType = EntityType(declaring: "crewMember")
    static let fieldTable = FieldTable<CrewMember>(\.jobID, \.userID, \.name, \.role)
    var id: UUID = .timeOrdered()
    var sync = SyncMetadata(createdAt: Date())
    var jobID: UUID
    var userID: UUID
    var name: String
    var role: String
}

/// A note on a job, written by a crew member as themselves.
struct Note: Syncable {
    static let entityType = EntityType(declaring: "note")
    static let fieldTable = FieldTable<Note>(\.jobID, \.authorID, \.body)
    var id: UUID = .timeOrdered()
    var sync = SyncMetadata(createdAt: Date())
    var jobID: UUID
    var authorID: UUID
    var body: String
    init(jobID: UUID, authorID: UUID, body: String) { (self.jobID, self.authorID, self.body) = (jobID, authorID, body) }
}

/// A video of a job: media, its file uploaded after the record.
struct Video: Syncable {
    static let entityType = EntityType(declaring: "video")
    static let fieldTable = FieldTable<Video>(\.jobID, \.fileName, \.contentType, \.byteSize, \.sha256, \.durationSeconds)
    var id: UUID = .timeOrdered()
    var sync = SyncMetadata(createdAt: Date())
    var jobID: UUID
    var fileName: String
    var contentType = "video/mp4"
    var byteSize: Int64 = 0
    var sha256 = ""
    var durationSeconds: Double?
    init(jobID: UUID, fileName: String) { (self.jobID, self.fileName) = (jobID, fileName) }
}

public enum ContractorJobs {
    /// Roles, strongest first: a lead runs the job, a hand works it, a client watches.
    static let roles = ["lead", "hand", "client"]
    static let crew: Set<String> = ["lead", "hand"]

    /// The schema, checked whole when first used.
    public static let schema: AppSchema = {
        do {
            return try AppSchema(name: "contractor-jobs", entities: [
                EntityDescription(Job.entityType, table: "jobs", model: Job.self, policy: .fieldMerge, fields: [
                    FieldDescription("name", .text, required: true),
                    FieldDescription("address", .text),
                    FieldDescription("status", .choice(Job.Status.allCases.map(\.rawValue))),
                    FieldDescription("dueDay", .day, optional: true),
                ], access: EntityAccess(writers: crew)),
                EntityDescription(CrewMember.entityType, table: "crew_members", model: CrewMember.self, policy: .serverWins, fields: [
                    FieldDescription("jobID", .uuid), FieldDescription("userID", .uuid),
                    FieldDescription("name", .text, required: true), FieldDescription("role", .choice(roles)),
                ], parents: [ParentRelation("jobID", Job.entityType)], access: EntityAccess(writers: ["lead"])),
                EntityDescription(Note.entityType, table: "notes", model: Note.self, policy: .appendOnly, fields: [
                    FieldDescription("jobID", .uuid), FieldDescription("authorID", .uuid), FieldDescription("body", .text, required: true),
                ], parents: [ParentRelation("jobID", Job.entityType), ParentRelation("authorID", CrewMember.entityType)],
                access: EntityAccess(writers: crew, authorField: "authorID", writesForOthers: ["lead"], deletesOthers: ["lead"])),
                EntityDescription(Video.entityType, table: "videos", model: Video.self, syncClass: .media, policy: .appendOnly, fields: [
                    FieldDescription("jobID", .uuid), FieldDescription("fileName", .text, required: true),
                    FieldDescription("contentType", .text, required: true), FieldDescription("byteSize", .count),
                    FieldDescription("sha256", .sha256), FieldDescription("durationSeconds", .quantity, optional: true),
                ], parents: [ParentRelation("jobID", Job.entityType)], access: EntityAccess(writers: crew)),
            ], scope: Job.entityType, membership: .init(
                entity: CrewMember.entityType, userField: "userID", roleField: "role", roles: roles, defaultRole: "hand"))
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    /// The app's local history. Shipped steps never change (their checksums are in the tests'
    /// `steps.txt`); a change is a new step.
    public static let steps: [MigrationStep] = [
        MigrationStep(version: 1, name: "1.0: jobs, crew and notes", sql: """
            \(LocalApp.syncedTable("jobs", columns: "name TEXT NOT NULL, address TEXT NOT NULL DEFAULT ''"))
            \(LocalApp.syncedTable("crew_members", columns: "job_id TEXT NOT NULL, user_id TEXT NOT NULL, name TEXT NOT NULL, role TEXT NOT NULL CHECK (role IN ('lead', 'hand', 'client'))"))
            \(LocalApp.syncedTable("notes", columns: "job_id TEXT NOT NULL, author_id TEXT NOT NULL, body TEXT NOT NULL"))
            CREATE INDEX notes_by_job ON notes(job_id, created_at);
            """),
        MigrationStep(version: 2, name: "1.1: videos", sql: """
            \(LocalApp.syncedTable("videos", columns: "job_id TEXT NOT NULL, file_name TEXT NOT NULL, content_type TEXT NOT NULL, byte_size INTEGER NOT NULL, sha256 TEXT NOT NULL, duration_seconds REAL"))
            CREATE INDEX videos_by_job ON videos(job_id);
            """),
        MigrationStep(version: 3, name: "1.2: a job's status and due day", sql: """
            ALTER TABLE jobs ADD COLUMN status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'inProgress', 'done'));
            ALTER TABLE jobs ADD COLUMN due_day TEXT;
            """),
        // Every parent column has an index: the store finds a job's crew, or a crew member's notes, by it
        // (a pulled parent's orphans, a deleted one's children) and refuses to open without one.
        MigrationStep(version: 4, name: "1.3: crew by job, notes by author", sql: """
            CREATE INDEX crew_members_by_job ON crew_members(job_id);
            CREATE INDEX notes_by_author ON notes(author_id);
            """),
    ]

    /// The app's local database: what a device opens.
    public static let app = LocalApp(schema: schema, steps: steps)
}
