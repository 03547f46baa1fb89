// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Larder",
    products: [
        .library(name: "Larder", targets: ["Larder"]),
    ],
    targets: [
        // Small C helpers the Swift core needs and Swift cannot spell portably:
        // hardware CRC32C, XXH64, atomics on mapped memory, byte-range file locks.
        .target(name: "CLarderSupport"),
        // The system's liblz4, the way GRDB wraps SQLite: found with pkg-config.
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"]), .brew(["lz4"])]
        ),
        .target(
            name: "Larder",
            dependencies: ["CLarderSupport", "CLZ4"]
        ),
        .executableTarget(
            name: "larder-demo",
            dependencies: ["Larder"],
            path: "Examples/demo"
        ),
        .testTarget(
            name: "LarderTests",
            dependencies: ["Larder", "CLarderSupport"]
        ),
    ]
)
