import Crypto
import Foundation
import Synchronization

/// The seal on every cursor this server writes: `<cursor>~<tag>`, the tag the first 8 bytes of an
/// HMAC-SHA256 of the cursor's text under a key of this server's (`server_settings`, made on first
/// use and shared by every instance on the database), as 16 lowercase hex digits.
///
/// Why: a cursor whose positions were damaged on the device (`999…`) read as "read past everything" and
/// was answered with empty pages for ever, with exit 0: the device never got another record (attack
/// 71, finding 2). Refusing positions past the server's newest change would have told any member that
/// newest change by bisection, the activity of every project (stop 50, finding 1). A seal tells
/// nothing: only text this server wrote verifies, whatever its numbers.
///
/// A bare number (the cursor of servers before positions per project) is refused. A cursor without a
/// seal (written before servers sealed them) is read only when none of its positions
/// is past the checkpoint the request carries, which the server found in its history (mark and all) and
/// which no cursor a server wrote ever passed: every position moves to a change the same answer named
/// in its checkpoint. So a device of an older server goes on where it was, and its next page's cursor is
/// sealed; a damaged one is refused. Read whatever its numbers, an unsealed `999999:<project>` was
/// sealed on the next page and the device never got that project's changes again, and one damaged byte
/// of a sealed cursor whose tag was all digits (`~` to `=`) made such a cursor (attack 72, finding 1).
/// The bound is the caller's own checkpoint, so a refusal tells nothing of others' changes.
final class CursorSeal: Sendable {
    /// The key's bytes once read (`SymmetricKey` is not `Sendable`).
    private let keyBytes = Mutex<Data?>(nil)

    /// The cursor `text` names, its seal checked. Refused as `unknown_cursor`: 400 when the text is not a
    /// cursor's form; 409 when its seal is not this server's (a damaged cursor, or another server's), or
    /// it has no seal and names a position past `checkpoint` (the request's, found in this history). A
    /// request of the documented form that does not match what this server holds is a conflict with its
    /// state, as a checkpoint its history lacks is (409 `history_changed`), not a malformed request.
    ///
    /// Returns the cursor and the checkpoint sealed with it (`text(of:checkpoint:storage:)`), nil for a
    /// cursor written without one.
    func open(
        _ text: String, checkpoint: Int64, storage: any ServerStorage
    ) async throws(ServerError) -> (cursor: PullCursor, checkpoint: HistoryCheckpoint?) {
        let (body, tag) = Self.parts(of: text)
        let (positions, sealedCheckpoint) = try Self.checkpointPart(of: body)
        let cursor = try PullCursor(text: String(positions))
        guard let tag else {
            // Only a sealed cursor carries a checkpoint: one without its seal was damaged.
            guard sealedCheckpoint == nil else {
                throw ServerError(
                    status: 409, .unknownCursor,
                    "a cursor carrying a checkpoint has lost its seal (the cursor was damaged): "
                        + "pull everything again from the start without one")
            }
            // A bare number counts every current project as read up to it, a project joined since
            // included, and a sealed cursor cut at its `:` is one: that project was never sent, and the
            // next sealed cursor marked it read (attack 73, finding 1). Its device pulls everything again.
            guard cursor.holdsProjectPositions else {
                throw ServerError(
                    status: 409, .unknownCursor,
                    "a cursor of one number (written before positions per project, or cut short) cannot tell which "
                        + "projects it read: pull everything again from the start without one")
            }
            guard cursor.highestPosition <= checkpoint else {
                throw ServerError(
                    status: 409, .unknownCursor,
                    "a cursor without a seal names a position past the checkpoint sent with it (the cursor was damaged): "
                        + "pull everything again from the start without one")
            }
            return (cursor, nil)
        }
        guard Self.constantTimeEqual(tag.utf8, try await self.tag(of: body, storage: storage).utf8) else {
            throw ServerError(
                status: 409, .unknownCursor,
                "the cursor's seal is not this server's (the cursor was damaged, or another server wrote it): "
                    + "pull everything again from the start without one")
        }
        return (cursor, sealedCheckpoint)
    }

    /// Splits a cursor's body into its positions and the checkpoint after `!`, if any: a checkpoint of
    /// the protocol's form past the empty history, as the API document's pattern has it (400 otherwise).
    private static func checkpointPart(of body: Substring) throws(ServerError) -> (positions: Substring, checkpoint: HistoryCheckpoint?) {
        guard let bang = body.firstIndex(of: "!") else { return (body, nil) }
        guard let checkpoint = HistoryCheckpoint(text: String(body[body.index(after: bang)...])), checkpoint.sequence > 0 else {
            throw ServerError(status: 400, .unknownCursor, "unknown cursor: pull everything again from the start without one")
        }
        return (body[..<bang], checkpoint)
    }

    /// Reads the key, making it first when the database has none (at the server's start).
    func prepare(storage: any ServerStorage) async throws(ServerError) {
        _ = try await key(from: storage)
    }

    /// `cursor`'s text with `checkpoint` (its answer's, when past the empty history) after `!`, sealed
    /// together: a client that sends the cursor back without a checkpoint is still checked against the
    /// history it was told of, and answered a checkpoint no older (`SyncServer.pull`). Without it, such
    /// a client was answered `0`, and after a restore went on from positions the restored history wrote
    /// again, never getting those changes (attack 96, finding 1).
    func text(of cursor: PullCursor, checkpoint: HistoryCheckpoint, storage: any ServerStorage) async throws(ServerError) -> String {
        let body = cursor.text + (checkpoint.sequence > 0 ? "!" + checkpoint.text : "")
        return body + "~" + (try await tag(of: Substring(body), storage: storage))
    }

    /// The cursor's text and its tag, when it ends in `~` and 16 lowercase hex digits.
    static func parts(of text: String) -> (body: Substring, tag: Substring?) {
        let utf8 = text.utf8
        guard utf8.count > 17 else { return (Substring(text), nil) }
        let tagStart = utf8.index(utf8.endIndex, offsetBy: -16)
        let mark = utf8.index(before: tagStart)
        guard utf8[mark] == UInt8(ascii: "~"),
            utf8[tagStart...].allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return (Substring(text), nil) }
        return (text[..<mark], text[tagStart...])
    }

    private func tag(of body: Substring, storage: any ServerStorage) async throws(ServerError) -> String {
        let key = try await self.key(from: storage)
        let code = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
        return code.prefix(8).hexText
    }

    private func key(from storage: any ServerStorage) async throws(ServerError) -> SymmetricKey {
        if let bytes = keyBytes.withLock({ $0 }) { return SymmetricKey(data: bytes) }
        let proposal = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.hexText
        let stored = try await storage.cursorKey(proposing: proposal)
        // The stored text's bytes are the key: HMAC takes a key of any length, and 64 random hex
        // digits hold the 256 bits the proposal was made of.
        guard stored.utf8.count >= 32 else {
            throw ServerError(.databaseFailure, message: "server_settings' cursor_key is shorter than 32 characters")
        }
        let bytes = Data(stored.utf8)
        keyBytes.withLock { $0 = bytes }
        return SymmetricKey(data: bytes)
    }

    /// Whether `a` and `b` hold the same bytes, in time that depends on their lengths only.
    private static func constantTimeEqual(_ a: Substring.UTF8View, _ b: String.UTF8View) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}
