// swift-tools-version: 6.2
import PackageDescription

/// Hybrid logical clocks and per-entity conflict strategies. Pure Swift on top of OutpostModels,
/// with no database and no I/O, so the device and the server settle conflicts with the same code.
let package = Package(
    name: "OutpostConflicts",
    products: [
        .library(name: "OutpostConflicts", targets: ["OutpostConflicts"]),
        // For tests and the reliability harness only: the reference model the conflicts README's table
        // states, which runs of the real devices and server are checked against.
        .library(name: "OutpostConflictModel", targets: ["OutpostConflictModel"]),
    ],
    dependencies: [
        .package(path: "../OutpostTesting"),
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels")
    ],
    targets: [
        .target(
            name: "OutpostConflicts",
            dependencies: [.product(name: "OutpostSchema", package: "OutpostSchema")]
        ),
        .target(
            name: "OutpostConflictModel",
            dependencies: [.product(name: "OutpostSchema", package: "OutpostSchema")]
        ),
        .testTarget(
            name: "OutpostConflictsTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                "OutpostConflicts",
                "OutpostConflictModel",
                .product(name: "OutpostModels", package: "OutpostModels"),
            ]
        ),
    ]
)

// One place for the language settings, so no target drifts.
for target in package.targets {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .treatAllWarnings(as: .error),
    ]
}
