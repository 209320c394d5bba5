// swift-tools-version: 6.2
import PackageDescription

// `make fuzz`: a libFuzzer target for the bundle import (the format's reader and the store's import),
// built apart from the workspace because every module must be compiled with
// `-sanitize=fuzzer,address -parse-as-library`. Its own package and scratch path keep those flags out
// of the normal build.
let package = Package(
    name: "OutpostFuzz",
    dependencies: [
        .package(path: "../Packages/OutpostBundles"),
        .package(path: "../Packages/OutpostStore"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // libFuzzer provides `main`; the target only defines `LLVMFuzzerTestOneInput`.
        .executableTarget(
            name: "BundleImportFuzzer",
            dependencies: [
                .product(name: "OutpostBundles", package: "OutpostBundles"),
                .product(name: "OutpostStore", package: "OutpostStore"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        )
    ]
)

for target in package.targets {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .swiftLanguageMode(.v6),
        .enableUpcomingFeature("ExistentialAny"),
        .treatAllWarnings(as: .error),
    ]
}
