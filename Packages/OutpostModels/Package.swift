// swift-tools-version: 6.2
import PackageDescription

/// The field-service app, the first schema declared on Outpost: its domain models, their schema
/// (`EntityCatalog.fieldService`) and validation rules (`OutpostModels`, on OutpostSchema alone, so a
/// team can adopt the vocabulary without the rest of the toolkit); its local database's history and
/// its workflows on the device (`OutpostFieldService`: `LocalApp.fieldService`, `clockIn`,
/// `attachPhoto`, `comment`, `asset(withQRCode:)`); and a test trait that runs a suite on its schema
/// (`OutpostFieldServiceTesting`).
///
/// The toolkit's packages name none of this: their tests use it, so those packages list this one, and
/// SwiftPM resolves the cycle between packages because no target depends on itself through it.
let package = Package(
    name: "OutpostModels",
    products: [
        .library(name: "OutpostModels", targets: ["OutpostModels"]),
        .library(name: "OutpostFieldService", targets: ["OutpostFieldService"]),
        .library(name: "OutpostFieldServiceTesting", targets: ["OutpostFieldServiceTesting"]),
    ],
    dependencies: [
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostMigrator"),
        .package(path: "../OutpostConflicts"),
        .package(path: "../OutpostStore"),
        .package(path: "../OutpostKit"),
        .package(path: "../OutpostServer"),
        // Tests only: a seeded random generator shared by every package's property tests.
        .package(path: "../OutpostTesting"),
    ],
    targets: [
        .target(name: "OutpostModels", dependencies: [.product(name: "OutpostSchema", package: "OutpostSchema")]),
        .target(
            name: "OutpostFieldService",
            dependencies: [
                "OutpostModels",
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "Outpost", package: "OutpostKit"),
            ]
        ),
        .target(
            name: "OutpostFieldServiceTesting",
            dependencies: [
                "OutpostModels", .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "OutpostServerTesting", package: "OutpostServer"),
            ]
        ),
        .testTarget(
            name: "OutpostModelsTests",
            dependencies: [
                "OutpostModels", "OutpostFieldServiceTesting",
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
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
