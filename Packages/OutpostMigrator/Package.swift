// swift-tools-version: 6.2
import PackageDescription

/// A versioned SQLite migrator on GRDB that only lets a schema grow: every step is checked against
/// SQLite's own view of the schema, so an app on any old version upgrades safely to the newest.
let package = Package(
    name: "OutpostMigrator",
    products: [
        .library(name: "OutpostMigrator", targets: ["OutpostMigrator"]),
        // For a team's test targets: migration path tests of its own steps (`MigrationPathCheck`).
        .library(name: "OutpostMigrationTesting", targets: ["OutpostMigrationTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(path: "../OutpostTesting"),
    ],
    targets: [
        // sqlite3_config is variadic, which Swift cannot call: a header of inline wrappers is all it takes.
        .systemLibrary(name: "COutpostSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(
            name: "OutpostMigrator",
            dependencies: [
                "COutpostSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "OutpostMigrationTesting",
            dependencies: [
                "OutpostMigrator",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ]
        ),
        .testTarget(
            name: "OutpostMigratorTests",
            dependencies: [
                "OutpostMigrator", "OutpostMigrationTesting",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
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
