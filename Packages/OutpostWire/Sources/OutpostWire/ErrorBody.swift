/// The JSON body of every error response, and a rejected mutation's reason: a stable code to
/// branch on and a message for people.
public struct ErrorBody: Sendable, Hashable, Codable {
    /// Stable; clients branch on it. Unknown codes decode too.
    public var code: ServerErrorCode
    /// Readable detail for logs and the user; never parsed. At most `ReportedMessage.maximumCharacters`
    /// as read: a device stores a refusal's message with the change it refused.
    public var message: String

    /// Creates an error body; `message` is bounded by `ReportedMessage`.
    public init(code: ServerErrorCode, message: String) {
        self.code = code
        self.message = ReportedMessage.bounded(message)
    }

    private enum CodingKeys: String, CodingKey { case code, message }

    /// Reads an error body, its message bounded as `init(code:message:)` bounds it.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(code: try container.decode(ServerErrorCode.self, forKey: .code), message: try container.decode(String.self, forKey: .message))
    }
}
