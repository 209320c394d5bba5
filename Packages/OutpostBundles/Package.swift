// swift-tools-version: 6.2
import PackageDescription

/// Pre-sync bundles, the format alone: a project's records in XML (read with libxml2's SAX2 parser)
/// or JSON (read with a bounded incremental tokenizer), alone or zipped with the files they reference,
/// validated against the frozen schemas, read as a stream of checked records and written by exporters.
/// No database: the store imports the records (`LocalStore.importBundle`), the server exports them.
let package = Package(
    name: "OutpostBundles",
    products: [
        .library(name: "OutpostBundles", targets: ["OutpostBundles"])
    ],
    dependencies: [
        .package(path: "../OutpostSchema"),
        .package(path: "../OutpostModels"),
        .package(path: "../OutpostWire"),
        .package(path: "../OutpostTesting"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // libxml2 as Debian ships it (2.9.14 on Debian 12); its headers live in /usr/include/libxml2.
        .systemLibrary(name: "Clibxml2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        .target(
            name: "OutpostBundles",
            dependencies: [
                "Clibxml2",
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "OutpostBundlesTests",
            dependencies: [
                .product(name: "OutpostSchema", package: "OutpostSchema"),
                .product(name: "OutpostModels", package: "OutpostModels"),
                .product(name: "OutpostFieldService", package: "OutpostModels"),
                .product(name: "OutpostFieldServiceTesting", package: "OutpostModels"),
                "OutpostBundles", .product(name: "OutpostWire", package: "OutpostWire"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "OutpostTesting", package: "OutpostTesting"),
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
