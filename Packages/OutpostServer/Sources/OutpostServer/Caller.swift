import Foundation

/// The user a request's bearer token belongs to; every route checks project access for this user.
struct Caller: Sendable, Hashable {
    let userID: UUID
}
