// swift-tools-version: 6.2
import PackageDescription

// A contractor job app built on Outpost as a team would build it: its own schema (jobs, crew, notes,
// videos), its own four migration steps, its own server. It depends on Outpost's packages by path
// only, and names no field-service entity.
let package = Package(
    name: "ContractorJobs",
    products: [
        .library(name: "ContractorJobs", targets: ["ContractorJobs"]),
        .executable(name: "contractor-jobs-server", targets: ["contractor-jobs-server"]),
    ],
    dependencies: [
        .package(path: "../../Packages/OutpostKit"),
        .package(path: "../../Packages/OutpostServer"),
        .package(path: "../../Packages/OutpostMigrator"),
        .package(path: "../../Packages/OutpostBundles"),
        .package(path: "../../Packages/OutpostTesting"),
    ],
    targets: [
        // The app's schema, models and migration steps.
        .target(name: "ContractorJobs", dependencies: [.product(name: "Outpost", package: "OutpostKit")]),
        // The app's own server: the reference server, serving this schema.
        .executableTarget(
            name: "contractor-jobs-server",
            dependencies: ["ContractorJobs", .product(name: "OutpostServer", package: "OutpostServer")]),
        .testTarget(
            name: "ContractorJobsTests",
            dependencies: [
                "ContractorJobs",
                .product(name: "Outpost", package: "OutpostKit"),
                .product(name: "OutpostServer", package: "OutpostServer"),
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostMigrator", package: "OutpostMigrator"),
                .product(name: "OutpostMigrationTesting", package: "OutpostMigrator"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
            ],
            exclude: ["steps.txt"]),
    ]
)

for target in package.targets {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .treatAllWarnings(as: .error),
    ]
}
