// swift-tools-version: 6.2
import PackageDescription

/// The sync transport: the wire protocol's types, the `SyncTransport` protocol with its HTTP and
/// in-memory implementations, the retry policy and the connectivity monitor. The durable queue and
/// the sync engine build on it.
let package = Package(
    name: "OutpostSync",
    products: [
        .library(name: "OutpostSync", targets: ["OutpostSync"])
    ],
    dependencies: [
        .package(path: "../OutpostTesting"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostConflicts"),
        .package(path: "../OutpostStore"),
    ],
    targets: [
        // zlib ships with every Apple SDK and Linux distribution; a module map is all Swift needs,
        // far cheaper to build than a compression package.
        .systemLibrary(name: "COutpostZlib", providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "OutpostSync",
            dependencies: [
                "COutpostZlib",
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
            ]
        ),
        .testTarget(
            name: "OutpostSyncTests",
            dependencies: [
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                "OutpostSync",
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
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
