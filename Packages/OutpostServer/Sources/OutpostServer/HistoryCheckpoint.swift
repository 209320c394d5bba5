import Crypto
import Foundation
import OutpostWire

/// How far a device has followed the server's history, as it carries it from answer to request: the
/// newest change it was told of (by its pulls' cursor, or by its pushes' answers) and the random mark
/// of the commit that wrote that change (`history_marks`), as text `<sequence>.<mark>` ("0" before
/// any). Sequence numbers alone cannot tell a server restored from a backup: once it takes new
/// changes, their numbers are ones the device already pulled past, and a cursor naming them skips them
/// in silence. The mark can: the restored history lacks that commit, or holds another one there.
///
/// It names a change of the caller's own records or projects, never the server's newest: that one
/// moved with every other project's writes, and let any member count and time them.
struct HistoryCheckpoint: Sendable, Hashable {
    let sequence: Int64
    let mark: String

    /// The checkpoint of a history with no change yet.
    static let empty = HistoryCheckpoint(sequence: 0, mark: "")

    init(sequence: Int64, mark: String) {
        self.sequence = sequence
        self.mark = mark
    }

    /// The checkpoint of change `sequence`, written by the commit whose mark is `commitMark`. The mark
    /// it carries is derived from both: the commit's own mark would hold for every sequence of the
    /// commit, and trying each would tell a caller how many changes others wrote in it.
    init(sequence: Int64, commitMark: String) {
        self.init(sequence: sequence, mark: Self.mark(of: sequence, commitMark: commitMark))
    }

    /// Whether this checkpoint is change `sequence`'s of the commit marked `commitMark` (nil: no commit).
    func isHeld(byCommitMark commitMark: String?) -> Bool {
        guard let commitMark else { return false }
        return mark == Self.mark(of: sequence, commitMark: commitMark)
    }

    private static func mark(of sequence: Int64, commitMark: String) -> String {
        SHA256.hash(data: Data("\(commitMark)/\(sequence)".utf8)).prefix(8).hexText
    }

    /// Reads a device's checkpoint: nil for text this server never wrote (the request is refused as
    /// such, not as a changed history).
    init?(text: String) {
        if text == "0" {
            self = .empty
            return
        }
        // Exactly as written: digits with no sign or leading zero, 16 lowercase hex digits.
        guard let (sequence, mark) = SyncProtocol.checkpointParts(text) else { return nil }
        self.init(sequence: sequence, mark: mark)
    }

    var text: String { sequence == 0 ? "0" : "\(sequence).\(mark)" }
}
