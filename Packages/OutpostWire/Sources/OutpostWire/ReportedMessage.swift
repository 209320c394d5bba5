/// The one bound on text a device keeps or shows about what a peer sent: an error's message, a server's
/// refusal of one change, the reason a pulled record was set aside. Such text often quotes what it
/// refuses (a value, a field's name), and a hostile server's 20 MiB value or 200 KB field name was
/// repeated whole in reports, stored in every queue row and quarantine entry, and filled the file at
/// 25 MB/s (attacks 65 F5, 66 F1 and F6).
public enum ReportedMessage {
    /// The most characters kept of one message.
    public static let maximumCharacters = 2_000

    /// `message`, or its first `maximumCharacters` characters and how many more there were.
    public static func bounded(_ message: String) -> String {
        guard message.utf8.count > maximumCharacters, message.count > maximumCharacters else { return message }
        let kept = message.prefix(maximumCharacters)
        return "\(kept)… (\(message.count - kept.count) more characters)"
    }
}
