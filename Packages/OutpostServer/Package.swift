// swift-tools-version: 6.2
import PackageDescription

/// The reference sync server: speaks `schemas/sync-api.yaml` (types from `OutpostWire`) over
/// Hummingbird 2, keeps every record in one embedded SQLite file (GRDB, migrated with
/// `OutpostMigrator`) or in PostgreSQL behind a storage protocol, and resolves pushes with the same
/// `OutpostConflicts` policy the devices run. It links no device code; its tests run in the
/// workspace (`Tests/ServerTests`), against the real device transport.
let package = Package(
    name: "OutpostServer",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "OutpostServer", targets: ["OutpostServer"]),
        // For tests, never an app: the reference server called in process (`TestServer`), with
        // injected failures, so engine and app tests meet the server's own rules.
        .library(name: "OutpostServerTesting", targets: ["OutpostServerTesting"]),
    ],
    dependencies: [
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostConflicts"),
        .package(path: "../OutpostMigrator"),
        .package(path: "../OutpostWire"),
        .package(path: "../OutpostBundles"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // libdeflate compresses the pull's pages (whole buffers, gzip format): in the same bytes' time
        // zlib takes, it gives a smaller body (`outpost-bench server`; see `PageCompression`).
        .systemLibrary(name: "CLibDeflate", providers: [.apt(["libdeflate-dev"]), .brew(["libdeflate"])]),
        .target(
            name: "OutpostServer",
            dependencies: [
                "CLibDeflate",
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "Hummingbird", package: "hummingbird"),
                // TLS: Hummingbird's wrapper over swift-nio-ssl.
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // Metrics: made through swift-metrics, exported in Prometheus' format by swift-prometheus.
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ]
        ),
        .target(
            name: "OutpostServerTesting",
            dependencies: [
                "OutpostServer",
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostWire", package: "OutpostWire"),
            ]
        ),
    ]
)

// One place for the language settings, so no target drifts.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .treatAllWarnings(as: .error),
    ]
}
