/// The JSON body of every error response, and a rejected mutation's reason: a stable code to
/// branch on and a message for people.
public struct ErrorBody: Sendable, Hashable, Codable {
    /// Stable; clients branch on it. Unknown codes decode too.
    public var code: ServerErrorCode
    /// Readable detail for logs and the user; never parsed.
    public var message: String

    /// Creates an error body.
    public init(code: ServerErrorCode, message: String) {
        self.code = code
        self.message = message
    }
}
