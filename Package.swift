// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Larder",
    // Apple platforms: Swift concurrency and the custom executors the tests use. Linux needs none.
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "Larder", targets: ["Larder"]),
        // The C API (include/larder.h) as a shared library: libLarderC.so / libLarderC.dylib,
        // installed as liblarder by `make -C Examples/c install`.
        .library(name: "LarderC", type: .dynamic, targets: ["LarderC"]),
        // The command-line tool: `larder info|dump|get|put|delete|clear|verify|recover|compact FILE`.
        .executable(name: "larder", targets: ["LarderTool"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // `swift package generate-documentation --target Larder` (Sources/Larder/Larder.docc).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Small C helpers the Swift core needs and Swift cannot spell portably:
        // hardware CRC32C, XXH64, atomics on mapped memory, byte-range file locks.
        .target(name: "CLarderSupport"),
        // The system's liblz4, the way GRDB wraps SQLite: found with pkg-config. Not on Apple
        // platforms, whose system LZ4 is the Compression framework (LZ4Codec.swift).
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"]), .yum(["lz4-devel"])]
        ),
        .target(
            name: "Larder",
            dependencies: [
                "CLarderSupport",
                .target(name: "CLZ4", condition: .when(platforms: [.linux, .android, .openbsd, .windows, .wasi])),
            ]
        ),
        // Swift's view of include/larder.h, so the exports are written against its declarations.
        .systemLibrary(name: "CLarderABI"),
        .target(
            name: "LarderC",
            dependencies: ["Larder", "CLarderABI", "CLarderSupport"]
        ),
        .executableTarget(
            name: "larder-demo",
            dependencies: ["Larder"],
            path: "Examples/demo"
        ),
        // Offline-first: JSON responses cached, served stale while the source is down (scripts/demo).
        .executableTarget(
            name: "offline-first",
            dependencies: ["Larder"],
            path: "Examples/offline-first"
        ),
        // Images and voice notes by URL within a byte limit, with eviction and trimming.
        .executableTarget(
            name: "media-cache",
            dependencies: ["Larder"],
            path: "Examples/media-cache"
        ),
        // The Swift half of the C interoperability check (Tests/C/Makefile, target "interop").
        .executableTarget(
            name: "larder-interop",
            dependencies: ["Larder"],
            path: "Tests/Interop"
        ),
        // A participant of the multi-process stress test (Tests/C/stress.sh).
        .executableTarget(
            name: "larder-stress",
            dependencies: ["Larder"],
            path: "Tests/Stress"
        ),
        // The libFuzzer target over damaged cache files (built and run by Tests/Fuzz/run, with
        // -sanitize=fuzzer; it has no main of its own).
        .executableTarget(
            name: "larder-fuzz",
            dependencies: ["Larder", "CLarderSupport"],
            path: "Tests/Fuzz",
            exclude: ["run", "corpus"]
        ),
        .testTarget(
            name: "LarderTests",
            dependencies: ["Larder", "CLarderSupport", "larder-fuzz"]
        ),
        // `larder` reads files through Larder's inspection SPI (Sources/Larder/Inspection) and
        // writes them through the public `Cache` API.
        .executableTarget(
            name: "LarderTool",
            dependencies: ["Larder", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Runs the built `larder` binary and compares its stdout and exit status exactly.
        .testTarget(
            name: "LarderToolTests",
            dependencies: ["Larder"]
        ),
    ]
)
