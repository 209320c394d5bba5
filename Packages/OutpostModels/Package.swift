// swift-tools-version: 6.2
import PackageDescription

/// The Outpost domain: typed records, the entity catalog and validation. Foundation only,
/// so any team can adopt the vocabulary without the rest of the toolkit.
let package = Package(
    name: "OutpostModels",
    products: [
        .library(name: "OutpostModels", targets: ["OutpostModels"])
    ],
    dependencies: [
        // Tests only: a seeded random generator shared by every package's property tests.
        .package(path: "../OutpostTesting")
    ],
    targets: [
        .target(name: "OutpostModels"),
        .testTarget(
            name: "OutpostModelsTests",
            dependencies: ["OutpostModels", .product(name: "OutpostTesting", package: "OutpostTesting")]
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
