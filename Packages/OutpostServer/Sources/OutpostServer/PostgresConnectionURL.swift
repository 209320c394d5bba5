import Foundation
import PostgresNIO

/// A `postgres://user:password@host:port/database?sslmode=…` URL turned into a client configuration.
///
/// `sslmode` follows libpq's names: `disable`, `prefer` (the default: TLS when the server offers it),
/// `require` (TLS, certificate not checked, as libpq does) and `verify-full` (TLS with the system's
/// trust roots and the host name checked), which is what a managed PostgreSQL should get.
struct PostgresConnectionURL: Sendable {
    /// The pool's configuration.
    let configuration: PostgresClient.Configuration
    /// The same settings for a single connection (migrations run on one, outside the pool, so an
    /// unreachable database fails the start at once instead of after the pool's retries).
    let connection: PostgresConnection.Configuration
    /// The URL without its password, for messages and logs.
    let redacted: String

    init(_ text: String, maximumConnections: Int = 20) throws(ServerError) {
        func refuse(_ message: String, underlying: (any Error & Sendable)? = nil) -> ServerError {
            ServerError(.invalidConfiguration, message: "PostgreSQL URL: \(message)", underlying: underlying)
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme,
            ["postgres", "postgresql"].contains(scheme.lowercased())
        else { throw refuse("expected postgres://user[:password]@host[:port]/database") }
        guard let host = components.host, !host.isEmpty else { throw refuse("the host is missing") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw refuse("port \(port) is outside 1…65535") }
        let user = components.user?.removingPercentEncoding ?? "postgres"
        // Without a password in the URL, libpq's variable, so a password can stay out of `ps`.
        let password = components.password?.removingPercentEncoding ?? ProcessInfo.processInfo.environment["PGPASSWORD"]
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let database = path.isEmpty ? user : (path.removingPercentEncoding ?? path)
        var mode = "prefer"
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode": mode = item.value ?? ""
            default: throw refuse("unknown parameter '\(item.name)' (only sslmode is read)")
            }
        }
        let tls: PostgresClient.Configuration.TLS
        let connectionTLS: PostgresConnection.Configuration.TLS
        do {
            switch mode {
            case "disable":
                tls = .disable
                connectionTLS = .disable
            case "prefer", "require":
                var unchecked = TLSConfiguration.makeClientConfiguration()
                unchecked.certificateVerification = .none
                let context = try NIOSSLContext(configuration: unchecked)
                tls = mode == "prefer" ? .prefer(unchecked) : .require(unchecked)
                connectionTLS = mode == "prefer" ? .prefer(context) : .require(context)
            case "verify-full":
                let checked = TLSConfiguration.makeClientConfiguration()
                tls = .require(checked)
                connectionTLS = .require(try NIOSSLContext(configuration: checked))
            default:
                throw refuse("sslmode '\(mode)' is not one of disable, prefer, require, verify-full")
            }
        } catch let error as ServerError {
            throw error
        } catch {
            throw refuse("TLS cannot be set up: \(error)", underlying: error)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        self.configuration = configuration
        var connection = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: connectionTLS)
        connection.options.connectTimeout = .seconds(10)
        self.connection = connection
        var shown = components
        if shown.password != nil { shown.password = "***" }
        self.redacted = shown.string ?? "postgres://\(host):\(port)/\(database)"
    }
}
