// swift-tools-version: 6.2
import PackageDescription

// The workspace: joins every package under Packages/ into one build graph, so GRDB and the other
// shared dependencies build once, and runs every package's tests plus the cross-package tests in
// Tests/. Each package stays a real SwiftPM package of its own that teams can depend on alone.
let package = Package(
    name: "OutpostWorkspace",
    products: [
        .executable(name: "outpost", targets: ["OutpostCLI"]),
        .executable(name: "outpost-bench", targets: ["OutpostBench"]),
        .executable(name: "outpost-demo", targets: ["OutpostDemo"]),
        .executable(name: "outpost-reliability", targets: ["OutpostReliability"]),
    ],
    dependencies: [
        .package(path: "Packages/OutpostSchema"),
        .package(path: "Packages/OutpostModels"),
        .package(path: "Packages/OutpostTesting"),
        .package(path: "Packages/OutpostMigrator"),
        .package(path: "Packages/OutpostConflicts"),
        .package(path: "Packages/OutpostStore"),
        .package(path: "Packages/OutpostWire"),
        .package(path: "Packages/OutpostSync"),
        .package(path: "Packages/OutpostBundles"),
        .package(path: "Packages/OutpostKit"),
        .package(path: "Packages/OutpostServer"),
        .package(path: "Examples/ContractorJobs"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "OutpostCLI",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/outpost"
        ),
        // `make demo`: a server and two devices through a field day, every claim checked.
        .executableTarget(
            name: "OutpostDemo",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostServer", package: "OutpostServer"),
            ],
            path: "Tools/outpost-demo"
        ),
        // `make reliability`: faults, kills and convergence at scale; every lost, duplicated and
        // diverged figure must be 0, and each failing seed is printed for replay.
        .executableTarget(
            name: "OutpostReliability",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostConflictModel", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tools/outpost-reliability",
            exclude: ["README.md"]
        ),
        // `make bench`: performance figures next to peers measured in the same run.
        .executableTarget(
            name: "OutpostBench",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tools/outpost-bench"
        ),
        // The example app's own tests, compiled here against the shared graph and run in a process of
        // their own (`make test`: a process runs on one app's schema).
        .testTarget(
            name: "ContractorJobsTests",
            dependencies: [
                .product(name: "ContractorJobs", package: "ContractorJobs"),
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostMigrationTesting", package: "OutpostMigrator"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ],
            path: "Examples/ContractorJobs/Tests/ContractorJobsTests",
            exclude: ["steps.txt"]
        ),
        // Each package's own tests, compiled here against the shared graph (see Workspace.md).
        .testTarget(
            name: "OutpostModelsTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ],
            path: "Packages/OutpostModels/Tests/OutpostModelsTests"
        ),
        .testTarget(
            name: "OutpostSchemaTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ],
            path: "Packages/OutpostSchema/Tests/OutpostSchemaTests"
        ),
        .testTarget(
            name: "OutpostMigratorTests",
            dependencies: [
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostMigrationTesting", package: "OutpostMigrator"),
            ],
            path: "Packages/OutpostMigrator/Tests/OutpostMigratorTests"
        ),
        .testTarget(
            name: "OutpostConflictsTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostConflictModel", package: "OutpostConflicts"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ],
            path: "Packages/OutpostConflicts/Tests/OutpostConflictsTests"
        ),
        .testTarget(
            name: "OutpostTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostServerTesting", package: "OutpostServer"),
            ],
            path: "Packages/OutpostKit/Tests/OutpostTests"
        ),
        .testTarget(
            name: "OutpostStoreTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostMigrationTesting", package: "OutpostMigrator"),
            ],
            path: "Packages/OutpostStore/Tests/OutpostStoreTests"
        ),
        .testTarget(
            name: "BundleImportTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Packages/OutpostStore/Tests/BundleImportTests"
        ),
        .testTarget(
            name: "OutpostBundlesTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ],
            path: "Packages/OutpostBundles/Tests/OutpostBundlesTests"
        ),
        .testTarget(
            name: "OutpostWireTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
            ],
            path: "Packages/OutpostWire/Tests/OutpostWireTests"
        ),
        .testTarget(
            name: "OutpostSyncTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostServerTesting", package: "OutpostServer"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Packages/OutpostSync/Tests/OutpostSyncTests"
        ),
        .testTarget(
            name: "OutpostServerTests",
            dependencies: [
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "OutpostSync", package: "OutpostSync"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/ServerTests"
        ),
        // Cross-package and end-to-end tests.
        .testTarget(
            name: "WorkspaceTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
                "OutpostCLI",
                "OutpostDemo",
                "OutpostReliability",
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostConflicts", package: "OutpostConflicts"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/WorkspaceTests"
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
