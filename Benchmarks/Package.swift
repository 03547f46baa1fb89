// swift-tools-version:6.0
// The benchmark of Larder against the stores users would pick instead: its own package, so that
// depending on Larder never pulls in SQLite, LMDB or tkrzw. Run it with `Benchmarks/run`.
import PackageDescription

let package = Package(
    name: "LarderBenchmarks",
    // Larder's own minimums on Apple platforms.
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    dependencies: [
        .package(name: "Larder", path: ".."),
    ],
    targets: [
        // Every C-side peer behind one small vtable, and the one C loop that measures them all
        // (Larder's C ABI included). The libraries come from Debian: libsqlite3-dev, liblmdb-dev,
        // libtkrzw-dev (Benchmarks/run installs them).
        .target(
            name: "CPeers",
            dependencies: [.product(name: "LarderC", package: "Larder")],
            linkerSettings: [
                .linkedLibrary("sqlite3"),
                .linkedLibrary("lmdb"),
                .linkedLibrary("tkrzw"),
            ]
        ),
        // The orchestrator: workloads, Larder's Swift API loop, concurrency, eviction, scale,
        // LZ4, and the report.
        .executableTarget(
            name: "larder-bench",
            dependencies: [
                "CPeers",
                .product(name: "Larder", package: "Larder"),
            ]
        ),
    ]
)
