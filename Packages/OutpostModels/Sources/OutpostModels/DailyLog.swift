import Foundation
import OutpostSchema

/// A jobsite's log for one day: notes, weather, crew and hours.
public struct DailyLog: Syncable {
    public static let entityType = EntityType.dailyLog
    public var id: UUID
    public var sync: SyncMetadata
    public var projectID: UUID
    /// The member who writes the log.
    public var authorID: UUID
    /// The site's calendar day, `YYYY-MM-DD`.
    public var day: String
    public var notes: String
    public var weather: String
    /// The crew on site, as written by the author.
    public var crew: String
    public var crewSize: Int
    /// Hours worked by the whole crew.
    public var hours: Double

    /// Creates a daily log.
    public init(
        id: UUID = .timeOrdered(), sync: SyncMetadata = SyncMetadata(createdAt: Timestamp.now()),
        projectID: UUID, authorID: UUID, day: String, notes: String = "", weather: String = "",
        crew: String = "", crewSize: Int = 0, hours: Double = 0
    ) {
        self.id = id
        self.sync = sync
        self.projectID = projectID
        self.authorID = authorID
        self.day = day
        self.notes = notes
        self.weather = weather
        self.crew = crew
        self.crewSize = crewSize
        self.hours = hours
    }
}
