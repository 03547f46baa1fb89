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
        .target(
            name: "Larder",
            dependencies: ["CLarderSupport"]
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
