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
    ],
    targets: [
        .target(
            name: "OutpostSync",
            dependencies: [
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
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
