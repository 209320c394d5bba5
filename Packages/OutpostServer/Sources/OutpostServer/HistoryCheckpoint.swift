/// Where the server's history stands, as a device carries it from answer to request: the newest change
/// sequence and the random mark its commit wrote (`history_marks`), as text `<sequence>.<mark>` ("0"
/// before any change). Sequence numbers alone cannot tell a server restored from a backup: once it
/// takes new changes, their numbers are the ones the device already pulled past, and a cursor naming
/// them skips them in silence. The mark can: the restored history holds the number with another mark,
/// or not at all.
struct HistoryCheckpoint: Sendable, Hashable {
    let sequence: Int64
    let mark: String

    /// The checkpoint of a history with no change yet.
    static let empty = HistoryCheckpoint(sequence: 0, mark: "")

    init(sequence: Int64, mark: String) {
        self.sequence = sequence
        self.mark = mark
    }

    /// Reads a device's checkpoint: nil for text this server never wrote (the request is refused as
    /// such, not as a changed history).
    init?(text: String) {
        if text == "0" {
            self = .empty
            return
        }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let sequence = Int64(parts[0]), sequence > 0, parts[1].count == 16,
            parts[1].allSatisfy({ $0.isHexDigit && !$0.isUppercase })
        else { return nil }
        self.init(sequence: sequence, mark: String(parts[1]))
    }

    var text: String { sequence == 0 ? "0" : "\(sequence).\(mark)" }
}
