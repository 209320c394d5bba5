// swift-tools-version: 6.2
import PackageDescription

/// The sync protocol as both ends speak it (`schemas/sync-api.yaml`): the request and answer types,
/// their one JSON codec, gzip, the server's error codes and the bundle formats. No engine, no
/// database: the device's sync engine and the server both depend on it, and on nothing of each other.
let package = Package(
    name: "OutpostWire",
    products: [
        .library(name: "OutpostWire", targets: ["OutpostWire"])
    ],
    dependencies: [
        .package(path: "../OutpostTesting"),
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostConflicts"),
    ],
    targets: [
        // zlib ships with every Apple SDK and Linux distribution; a module map is all Swift needs,
        // far cheaper to build than a compression package.
        .systemLibrary(name: "COutpostZlib", providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "OutpostWire",
            dependencies: [
                "COutpostZlib",
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
            ]
        ),
        .testTarget(
            name: "OutpostWireTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                "OutpostWire",
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
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
