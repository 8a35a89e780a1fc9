// swift-tools-version:6.0
import PackageDescription

/// Release builds of the per-request modules skip the runtime exclusivity checks (the compiler's
/// static checks and debug builds keep them): see docs/performance.md for the measured effect.
let hotPathSettings: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "parley",
    // Apple platforms matter only to the ParleyKit product (the server builds on Linux).
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .executable(name: "parley", targets: ["parley"]),
        // The client SDK: the portable core and, on Apple platforms, the URLSession transport
        // with the CallKit / LiveCommunicationKit glue (an empty module elsewhere).
        .library(name: "ParleyKit", targets: ["ParleyKit", "ParleyKitApple"]),
        // The Linux transport on Parley's event loops (tests, command-line clients).
        .library(name: "ParleyKitLinux", targets: ["ParleyKitLinux"]),
        .executable(name: "parley-chat", targets: ["parley-chat"]),
    ],
    targets: [
        // C system libraries and the Linux shim (lowest layer).
        .target(name: "CLinux"),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),

        // Leaf utilities.
        .target(name: "ParleyLog"),
        .target(name: "ParleyMetrics"),
        .target(name: "ParleyJSON", swiftSettings: hotPathSettings),

        // Bytes and sockets.
        .target(name: "ParleyNet", dependencies: ["CLinux", "ParleyLog", "COpenSSL"], swiftSettings: hotPathSettings),

        // Protocols and storage.
        .target(name: "ParleyHTTP", dependencies: ["ParleyNet", "ParleyLog", "ParleyMetrics"], swiftSettings: hotPathSettings),
        .target(name: "ParleyPostgres", dependencies: ["CLibPQ", "CLinux", "ParleyNet", "ParleyLog", "ParleyMetrics"], swiftSettings: hotPathSettings),
        .target(name: "ParleyWebSocket", dependencies: ["ParleyNet", "ParleyHTTP", "ParleyLog", "COpenSSL"]),

        // Domain.
        .target(name: "ParleyIdentity", dependencies: ["ParleyHTTP", "ParleyJSON", "ParleyNet", "ParleyLog", "COpenSSL"]),
        .target(name: "ParleyMail", dependencies: ["ParleyPostgres", "ParleyNet", "ParleyLog", "ParleyMetrics"]),
        .target(name: "ParleyAccounts", dependencies: ["ParleyJSON", "ParleyPostgres", "ParleyNet", "ParleyLog", "CSodium"], swiftSettings: hotPathSettings),

        .target(name: "ParleyRealtime", dependencies: [
            "ParleyJSON", "ParleyPostgres", "ParleyNet", "ParleyWebSocket", "ParleyHTTP", "ParleyLog", "ParleyMetrics",
        ]),

        .target(name: "ParleyCalls", dependencies: [
            "ParleyJSON", "ParleyRealtime", "ParleyHTTP", "ParleyWebSocket", "ParleyPostgres", "ParleyNet", "ParleyLog",
            "ParleyMetrics", "COpenSSL",
        ]),

        .target(name: "ParleyPush", dependencies: [
            "ParleyJSON", "ParleyPostgres", "ParleyNet", "ParleyHTTP", "ParleyRealtime", "ParleyLog", "ParleyMetrics",
        ]),

        // Cloud Code through webhooks: hooks, the webhook caller, after-trigger and job deliveries.
        .target(name: "ParleyCloud", dependencies: ["ParleyHTTP", "ParleyJSON", "ParleyPostgres", "ParleyNet", "ParleyLog", "ParleyMetrics"]),

        // Wire formats of the domain: the Parse-compatible REST API.
        .target(name: "ParleyFiles", dependencies: ["ParleyNet", "ParleyHTTP", "CSodium", "CLinux"]),
        .target(name: "ParleyParse", dependencies: ["ParleyHTTP", "ParleyJSON", "ParleyAccounts", "ParleyCloud", "ParleyFiles", "ParleyNet", "ParleyLog"], swiftSettings: hotPathSettings),

        // The schema: migrations/*.sql compiled in by a build plugin (its tool runs on the build host).
        .target(name: "ParleyMigrations", plugins: ["EmbedMigrations"]),
        .plugin(name: "EmbedMigrations", capability: .buildTool(), dependencies: ["EmbedMigrationsTool"]),
        .executableTarget(name: "EmbedMigrationsTool", path: "Tools/EmbedMigrationsTool"),

        // Wiring and the executable.
        .target(name: "ParleyServer", dependencies: [
            "ParleyNet", "ParleyHTTP", "ParleyWebSocket", "ParleyJSON", "ParleyPostgres", "ParleyMigrations", "ParleyAccounts",
            "ParleyParse", "ParleyCloud", "ParleyFiles", "ParleyRealtime", "ParleyCalls", "ParleyPush", "ParleyIdentity", "ParleyMail", "ParleyLog", "ParleyMetrics", "CLinux",
        ]),
        .executableTarget(name: "parley", dependencies: ["ParleyServer"]),

        // The client SDK (docs/sdk-swift.md). The core is portable (ParleyJSON only, so it also
        // builds for iOS); the Linux transport runs it on ParleyNet's loops; the Apple target
        // compiles only where Foundation networking and CallKit exist (its sources are in
        // `#if canImport(...)` blocks, and it is the one target the no-Foundation check exempts).
        .target(name: "ParleyKit", dependencies: ["ParleyJSON"]),
        .target(name: "ParleyKitLinux", dependencies: ["ParleyKit", "ParleyWebSocket", "ParleyHTTP", "ParleyNet"]),
        .target(name: "ParleyKitApple", dependencies: ["ParleyKit", "ParleyJSON"]),
        .executableTarget(name: "parley-chat", dependencies: ["ParleyKit", "ParleyKitLinux", "ParleyJSON", "ParleyNet"]),
        .executableTarget(name: "parley-sdk-bench", dependencies: ["ParleyKit", "ParleyKitLinux", "ParleyJSON", "ParleyNet"]),

        // Tests.
        .target(name: "ParleyTestSupport", dependencies: ["ParleyPostgres", "ParleyNet"], path: "Tests/ParleyTestSupport"),
        .testTarget(name: "ParleyJSONTests", dependencies: ["ParleyJSON"]),
        .testTarget(name: "ParleyNetTests", dependencies: ["ParleyNet", "ParleyLog", "ParleyTestSupport"]),
        .testTarget(name: "ParleyHTTPTests", dependencies: ["ParleyHTTP", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyPostgresTests", dependencies: ["ParleyPostgres", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyWebSocketTests", dependencies: ["ParleyWebSocket", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyIdentityTests", dependencies: ["ParleyIdentity", "ParleyHTTP", "ParleyJSON", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyMailTests", dependencies: ["ParleyMail", "ParleyPostgres", "ParleyNet", "ParleyMetrics", "ParleyTestSupport"]),
        .testTarget(name: "ParleyAccountsTests", dependencies: ["ParleyAccounts", "ParleyJSON", "ParleyTestSupport"]),
        .testTarget(name: "ParleyParseTests", dependencies: ["ParleyParse", "ParleyAccounts", "ParleyFiles", "ParleyJSON", "ParleyTestSupport"]),
        .testTarget(name: "ParleyFilesTests", dependencies: ["ParleyFiles", "ParleyHTTP", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyRealtimeTests", dependencies: ["ParleyRealtime", "ParleyJSON", "ParleyTestSupport"]),
        .testTarget(name: "ParleyCallsTests", dependencies: ["ParleyCalls", "ParleyJSON", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyPushTests", dependencies: ["ParleyPush", "ParleyHTTP", "ParleyNet", "ParleyJSON", "ParleyTestSupport"]),
        .testTarget(name: "ParleyKitTests", dependencies: ["ParleyKit", "ParleyKitLinux", "ParleyJSON", "ParleyHTTP", "ParleyNet", "ParleyTestSupport"]),
        .testTarget(name: "ParleyServerTests", dependencies: ["ParleyServer", "ParleyMigrations", "ParleyPostgres", "ParleyJSON", "ParleyTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
