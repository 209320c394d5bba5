// swift-tools-version: 6.2
import PackageDescription

/// The device's database, the source of truth: the local schema's versions v1…v5 on OutpostMigrator,
/// and the store that reads and writes it.
let package = Package(
    name: "OutpostStore",
    products: [
        .library(name: "OutpostStore", targets: ["OutpostStore"])
    ],
    dependencies: [
        .package(path: "../OutpostTesting"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostMigrator"),
        .package(path: "../OutpostConflicts"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        .target(
            name: "OutpostStore",
            dependencies: [
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the list path that reads columns straight from a stepped statement.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "OutpostStoreTests",
            dependencies: ["OutpostStore", .product(name: "OutpostTesting", package: "OutpostTesting")]
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
