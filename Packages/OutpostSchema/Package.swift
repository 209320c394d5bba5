// swift-tools-version: 6.2
import PackageDescription

/// What every Outpost app's records are made of, whatever its domain: the generic record
/// (`EntityRecord`) and its field values, the schema an app declares (`AppSchema`, `EntityDescription`,
/// `FieldDescription`) and installs for its process (`EntityCatalog`), the `Syncable` protocol its
/// typed models conform to, and the JSON reader and writer every package shares. Foundation only.
let package = Package(
    name: "OutpostSchema",
    products: [
        .library(name: "OutpostSchema", targets: ["OutpostSchema"])
    ],
    dependencies: [
        // Tests only: a seeded random generator shared by every package's property tests.
        .package(path: "../OutpostTesting")
    ],
    targets: [
        .target(name: "OutpostSchema"),
        .testTarget(
            name: "OutpostSchemaTests",
            dependencies: ["OutpostSchema", .product(name: "OutpostTesting", package: "OutpostTesting")]
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
