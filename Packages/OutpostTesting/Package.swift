// swift-tools-version: 6.2
import PackageDescription

/// Helpers the packages' tests share, and that teams can use in their own: a seeded random generator
/// so property tests and fault schedules replay exactly from their seed, and contract files (YAML,
/// OpenAPI) read and checked by real parsers through `python3`. Foundation only.
let package = Package(
    name: "OutpostTesting",
    products: [
        .library(name: "OutpostTesting", targets: ["OutpostTesting"])
    ],
    targets: [
        .target(name: "OutpostTesting")
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
