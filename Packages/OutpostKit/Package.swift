// swift-tools-version: 6.2
import PackageDescription

/// The integration package: one `Device` a field app opens with a file path. It wires the store (which
/// also imports bundles), the sync engine and the connectivity monitor together and adds no logic of
/// its own; `import Outpost` gives `Device` and the types an app names beside it.
/// (The folder is `OutpostKit` because a package folder named `Outpost` would share its identity with
/// a checkout of the workspace itself; the module is `Outpost`.)
let package = Package(
    name: "OutpostKit",
    products: [
        .library(name: "Outpost", targets: ["Outpost"])
    ],
    dependencies: [
        .package(path: "../OutpostServer"),
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostMigrator"),
        .package(path: "../OutpostConflicts"),
        .package(path: "../OutpostStore"),
        .package(path: "../OutpostWire"),
        .package(path: "../OutpostSync"),
        .package(path: "../OutpostBundles"),
        .package(path: "../OutpostTesting"),
    ],
    targets: [
        .target(
            name: "Outpost",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
            ]
        ),
        .testTarget(
            name: "OutpostTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                "Outpost", .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostSync", package: "OutpostSync"),
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
