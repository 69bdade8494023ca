// swift-tools-version: 6.0
// Pushgate: Web Push (RFC 8030/8291) and app backends → APNs.
//
// Targets split by what they depend on:
//   C…              system-library bindings (Debian -dev packages) and one shim target
//   Shared          configuration, logging, Postgres/Redis clients, crypto, migrations
//   IngressService  the public HTTP front (validate, authenticate, limit, enqueue)
//   DispatchWorker  consumes the queue and delivers through APNs
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "Pushgate",
    products: [
        .executable(name: "ingress-service", targets: ["IngressService"]),
        .executable(name: "dispatch-worker", targets: ["DispatchWorker"]),
        .executable(name: "apns-simulator", targets: ["APNsSimulator"]),
        .executable(name: "pushctl", targets: ["pushctl"]),
        .library(name: "Shared", targets: ["Shared"]),
    ],
    targets: [
        // MARK: C bindings
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // hiredis's pkg-config file adds -D_FILE_OFFSET_BITS=64, which SwiftPM refuses (noisily); its
        // headers live in the default include path, so the module map links it directly.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // Macros and variadic C functions that Swift cannot call directly.
        .target(name: "CShims", dependencies: ["COpenSSL", "CMicroHTTPD"]),

        // MARK: Shared core
        .target(
            name: "Shared",
            dependencies: ["CLibPQ", "CHiredis", "CNGHTTP2", "COpenSSL", "CMicroHTTPD", "CShims"],
            swiftSettings: swiftSettings
        ),

        // MARK: Services
        .executableTarget(
            name: "IngressService",
            dependencies: ["Shared", "CMicroHTTPD", "CShims"],
            exclude: ["Admin/README.md"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "DispatchWorker",
            dependencies: ["Shared"],
            swiftSettings: swiftSettings
        ),

        // MARK: Operator command line (admin API client: Foundation, and OpenSSL for https)
        .executableTarget(
            name: "pushctl",
            dependencies: ["COpenSSL"],
            swiftSettings: swiftSettings
        ),

        // MARK: Test stand-in for Apple
        .executableTarget(
            name: "APNsSimulator",
            dependencies: ["Shared", "CNGHTTP2", "COpenSSL", "CShims"],
            exclude: ["README.md", "example-config.json"],
            swiftSettings: swiftSettings
        ),

        // MARK: Benchmarks (not tests; see scripts/bench)
        .executableTarget(
            name: "apns-bench",
            dependencies: ["Shared"],
            path: "Sources/Benchmarks/APNsBench",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests (real Postgres and Redis; see scripts/test)
        .target(
            name: "TestSupport",
            dependencies: ["Shared", "CShims"],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SharedTests",
            dependencies: ["Shared", "TestSupport", "IngressService", "CNGHTTP2"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IngressServiceTests",
            dependencies: ["IngressService", "Shared", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DispatchWorkerTests",
            dependencies: ["DispatchWorker", "IngressService", "APNsSimulator", "Shared", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: ["APNsSimulator", "Shared", "TestSupport", "CNGHTTP2"],
            swiftSettings: swiftSettings
        ),
        // The APNs client against the real simulator, in-process: every reason, token cadence, load.
        .testTarget(
            name: "APNsIntegrationTests",
            dependencies: ["Shared", "APNsSimulator", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        // The App API end to end (ingress + worker + simulator); reuses DispatchWorkerTests/Harness (symlink).
        .testTarget(
            name: "AppAPITests",
            dependencies: ["IngressService", "DispatchWorker", "APNsSimulator", "Shared", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        // Real parties end to end: pywebpush as the sender, http_ece as the app; reuses DispatchWorkerTests/Harness (symlink).
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["DispatchWorker", "IngressService", "APNsSimulator", "Shared", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AdminAPITests",
            dependencies: ["IngressService", "pushctl", "Shared", "TestSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
