// swift-tools-version: 6.2
import PackageDescription

/// The device's side of sync: the HTTP implementation of `SyncTransport`, the retry policy, the
/// connectivity monitor and the sync engine that drives the replica's queue and pull. The protocol's
/// types and the transport contract come from `OutpostWire`, which the server shares. The tests run
/// the engine against the reference server in process (`OutpostServerTesting`); only they depend
/// on the server package, so an app that depends on this one never resolves it.
let package = Package(
    name: "OutpostSync",
    products: [
        .library(name: "OutpostSync", targets: ["OutpostSync"])
    ],
    dependencies: [
        .package(path: "../OutpostTesting"),
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostConflicts"),
        .package(path: "../OutpostStore"),
        .package(path: "../OutpostWire"),
        .package(path: "../OutpostServer"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
    ],
    targets: [
        .target(
            name: "OutpostSync",
            dependencies: [
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                // The device's HTTP client: streams answers and bounds their inflation as they arrive.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ]
        ),
        .testTarget(
            name: "OutpostSyncTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                "OutpostSync",
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostServerTesting", package: "OutpostServer"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
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
