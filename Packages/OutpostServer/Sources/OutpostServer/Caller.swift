import Foundation

/// The user a request's bearer token belongs to; every route checks project access for this user.
package struct Caller: Sendable, Hashable {
    package let userID: UUID
}
