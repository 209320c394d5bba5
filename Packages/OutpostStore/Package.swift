// swift-tools-version: 6.2
import PackageDescription

/// The device's database, the source of truth: the local schema (`LocalSchema`, on OutpostMigrator),
/// and the store that owns the replicated state in it: local writes, the outgoing queue, pulled
/// pages merged through the conflict policy, and pre-sync bundles (read by OutpostBundles) imported
/// through the same rule.
let package = Package(
    name: "OutpostStore",
    products: [
        .library(name: "OutpostStore", targets: ["OutpostStore"])
    ],
    dependencies: [
        .package(path: "../OutpostTesting"),
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostMigrator"),
        .package(path: "../OutpostConflicts"),
        .package(path: "../OutpostBundles"),
        .package(path: "../OutpostWire"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        .target(
            name: "OutpostStore",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the list path that reads columns straight from a stepped statement.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "OutpostStoreTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                "OutpostStore", .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostMigrationTesting", package: "OutpostMigrator"),
                .product(name: "OutpostWire", package: "OutpostWire"),
            ]
        ),
        // Importing and exporting pre-sync bundles through the store.
        .testTarget(
            name: "BundleImportTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                "OutpostStore",
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "GRDB", package: "GRDB.swift"),
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
