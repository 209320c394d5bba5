import Foundation

/// The user a request's bearer token belongs to; every route checks project access for this user.
package struct Caller: Sendable, Hashable {
    package let userID: UUID
    /// The SHA-256 of the token the request came with. A request is let in when it arrives and worked
    /// on when its turn comes, behind the user's others and the database's one writer: the token is asked
    /// for again then (`SyncServer.requireTokenStillHeld`, and inside a push's transaction), so a token
    /// the office revokes meanwhile has nothing more read or written (attack 113, F7).
    package let tokenDigest: String

    package init(userID: UUID, tokenDigest: String) {
        self.userID = userID
        self.tokenDigest = tokenDigest
    }

    /// Whether `holder`, what the token's row says now (nil: revoked or expired), still lets this caller
    /// sync: the same member, and not an admin token.
    func isStillLetIn(by holder: TokenHolder?) -> Bool {
        guard let holder else { return false }
        return holder.userID == userID && !holder.isAdmin
    }
}

/// Whom a stored token belongs to, and whether it is an admin token. The two kinds never stand in for
/// each other: a sync route takes only a member's token (`Caller`), an `/admin` route only an admin's
/// (`Administrator`), so a token copied off a phone administers nothing.
struct TokenHolder: Sendable, Hashable {
    let userID: UUID
    let isAdmin: Bool
}

/// The operator an admin token belongs to: what the `/admin` routes act for and the admin log names.
package struct Administrator: Sendable, Hashable {
    package let userID: UUID
    /// The first 12 hex digits of the token's SHA-256, as `IssuedToken.digestPrefix` lists it.
    package let tokenPrefix: String

    /// How the admin log names them.
    var actor: String { "admin \(userID.uuidString.lowercased()) (token \(tokenPrefix))" }
}
