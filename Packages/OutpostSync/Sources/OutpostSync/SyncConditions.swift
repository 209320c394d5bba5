import OutpostWire

/// What the app knows about the device that the network cannot tell: conditions that hold media
/// back while structured data keeps flowing.
public struct SyncConditions: Sendable, Hashable {
    /// The connection costs money per byte (cellular, a personal hotspot).
    public var isMetered: Bool
    /// The battery is low or the system is saving power.
    public var isLowBattery: Bool
    /// The user asked for media now ("upload photos"), overriding quality and conditions.
    public var mediaRequested: Bool

    /// Creates conditions; none apply by default.
    public init(isMetered: Bool = false, isLowBattery: Bool = false, mediaRequested: Bool = false) {
        self.isMetered = isMetered
        self.isLowBattery = isLowBattery
        self.mediaRequested = mediaRequested
    }
}
