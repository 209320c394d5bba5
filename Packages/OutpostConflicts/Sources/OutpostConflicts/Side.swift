/// Which copy a value came from. Strategies such as server-wins need to know which side is the
/// server, and the same code runs on both, so sides are named by role rather than local or remote.
public enum Side: String, Sendable, Hashable, Codable, CaseIterable {
    /// The device's version: its pending change when it pulls, the pushed change when the server merges.
    case client
    /// The server's version: the pulled record on the device, the stored record on the server.
    case server
}
