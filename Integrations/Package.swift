// swift-tools-version:6.0
// Larder for server Swift: Hummingbird's persist driver and Vapor's cache. Its own package, so that
// depending on Larder never pulls in SwiftNIO or a framework. Test it with
// `swift test --package-path Integrations`.
import PackageDescription

let package = Package(
    name: "LarderIntegrations",
    // Larder's and Hummingbird's minimums on Apple platforms.
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17)],
    products: [
        .library(name: "LarderHummingbird", targets: ["LarderHummingbird"]),
        .library(name: "LarderVapor", targets: ["LarderVapor"]),
    ],
    dependencies: [
        .package(name: "Larder", path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // Sessions (SessionMiddleware, SessionStorage) build on a persist driver.
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        // The example server's own listening socket (SO_REUSEPORT).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // The tests' requests to the example server's processes.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        .target(
            name: "LarderHummingbird",
            dependencies: [
                .product(name: "Larder", package: "Larder"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        .target(
            name: "LarderVapor",
            dependencies: [
                .product(name: "Larder", package: "Larder"),
                .product(name: "Vapor", package: "vapor"),
            ]
        ),
        // A Hummingbird app: an expensive response cached, sessions kept, in one Larder file that
        // several processes on one port (SO_REUSEPORT) share.
        .executableTarget(
            name: "larder-server",
            dependencies: [
                "LarderHummingbird",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/server"
        ),
        // What both test targets use: temporary files.
        .target(
            name: "IntegrationTestSupport",
            path: "Tests/IntegrationTestSupport"
        ),
        .testTarget(
            name: "LarderHummingbirdTests",
            dependencies: [
                "IntegrationTestSupport",
                "LarderHummingbird",
                "larder-server",
                .product(name: "Larder", package: "Larder"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LarderVaporTests",
            dependencies: [
                "IntegrationTestSupport",
                "LarderVapor",
                .product(name: "Larder", package: "Larder"),
                .product(name: "VaporTesting", package: "vapor"),
            ]
        ),
    ]
)
