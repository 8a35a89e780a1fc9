import Foundation
import ParleyCalls
import ParleyJSON
import ParleyNet
import ParleyTestSupport
import XCTest

final class TURNCredentialsTests: XCTestCase {
    /// A tool the setup installs is missing: `XCTSkip` on a developer machine, a failure under CI
    /// (`CI` or `PARLEY_REQUIRE_TOOLS` set, as `.ci/run` does), like `tools_required()` of the integration scripts.
    static func missingTool(_ message: String) -> any Error {
        let environment = ProcessInfo.processInfo.environment
        let required = !(environment["CI"] ?? "").isEmpty || !(environment["PARLEY_REQUIRE_TOOLS"] ?? "").isEmpty
        return required ? MissingTool(message: message) : XCTSkip(message)
    }

    struct MissingTool: Error, CustomStringConvertible {
        let message: String
        var description: String { "\(message), which is required under CI (CI / PARLEY_REQUIRE_TOOLS): run scripts/setup.sh" }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// RFC 2202 test cases 1, 2 and 6 for HMAC-SHA1.
    func testHMACSHA1MatchesRFC2202() {
        XCTAssertEqual(Self.hex(HMACDigest.sha1(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))),
                       "b617318655057264e28bc0b6fb378c8ef146be00")
        XCTAssertEqual(Self.hex(HMACDigest.sha1(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))),
                       "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
        XCTAssertEqual(Self.hex(HMACDigest.sha1(key: [UInt8](repeating: 0xaa, count: 80), message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))),
                       "aa4ae5e15272d00e95705637ce8a3b55ed402112")
    }

    /// Fixed vectors: base64(HMAC-SHA1) as coturn computes it (checked with `openssl dgst -sha1 -hmac`).
    func testPasswordFixedVectors() {
        XCTAssertEqual(TURNCredentials.password(username: "1796023390:alice", secret: "s3cret"), "0uXmZsKpq++mM4D41O4U5rHrevM=")
        // RFC 2202 case 2 in base64.
        XCTAssertEqual(TURNCredentials.password(username: "what do ya want for nothing?", secret: "Jefe"), "7/zfauXrL6LSdBbV8YTfnCWafHk=")
    }

    func testPasswordMatchesPythonHMAC() throws {
        let venv = ParleyServerProcess.repositoryRoot.appendingPathComponent(".venv/bin/python").path
        let python = [venv, "/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let python else { throw Self.missingTool("no python3 (the project's .venv or /usr/bin/python3)") }
        let cases = [
            ("s3cret", "1700000000:AbCdEf1234"),
            ("a much longer shared secret with spaces and ünïcödé", "4102444800:user-with-dashes"),
            (String(repeating: "k", count: 200), "1:x"),
            ("secret", "1700000000:名前"),
        ]
        for (secret, username) in cases {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = ["-c", "import hmac,hashlib,base64,sys; print(base64.b64encode(hmac.new(sys.argv[1].encode(), sys.argv[2].encode(), hashlib.sha1).digest()).decode())", secret, username]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
            let expected = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertEqual(TURNCredentials.password(username: username, secret: secret), expected, "secret \(secret) username \(username)")
        }
    }

    func testCredentialFormat() {
        let configuration = TURNConfiguration(uris: ["turn:turn.example.com:3478?transport=udp", "turns:turn.example.com:5349"], secret: "s3cret", ttl: .seconds(3_600))
        let credentials = TURNCredentials(userId: "Xy12AbCd90", configuration: configuration, nowSeconds: 1_700_000_000)
        XCTAssertEqual(credentials.username, "1700003600:Xy12AbCd90")
        XCTAssertEqual(credentials.password, TURNCredentials.password(username: "1700003600:Xy12AbCd90", secret: "s3cret"))
        XCTAssertEqual(credentials.ttl, 3_600)
        XCTAssertEqual(credentials.json, [
            "uris": ["turn:turn.example.com:3478?transport=udp", "turns:turn.example.com:5349"],
            "username": "1700003600:Xy12AbCd90",
            "password": .string(credentials.password),
            "ttl": 3_600,
        ])
    }

    func testDisabledWithoutSecretOrURIs() {
        XCTAssertNil(TURNConfiguration.ifEnabled(uris: [], secret: "s", ttl: .seconds(60)))
        XCTAssertNil(TURNConfiguration.ifEnabled(uris: ["turn:x"], secret: nil, ttl: .seconds(60)))
        XCTAssertNil(TURNConfiguration.ifEnabled(uris: ["turn:x"], secret: "", ttl: .seconds(60)))
        XCTAssertNotNil(TURNConfiguration.ifEnabled(uris: ["turn:x"], secret: "s", ttl: .seconds(60)))
    }

    /// A real coturn with `--use-auth-secret` on loopback accepts an allocation with our
    /// credential and refuses a wrong password and an expired username.
    func testRealTurnServerAcceptsTheCredential() throws {
        let turnserver = "/usr/bin/turnserver", uclient = "/usr/bin/turnutils_uclient"
        guard FileManager.default.isExecutableFile(atPath: turnserver), FileManager.default.isExecutableFile(atPath: uclient) else {
            throw Self.missingTool("coturn is not installed (scripts/setup.sh --all installs it)")
        }
        let secret = "parley-test-secret-\(getpid())"
        let (server, port) = try Self.startCoturn(turnserver, secret: secret)
        defer {
            server.terminate()
            server.waitUntilExit()
        }

        func allocate(username: String, password: String) throws -> Int32 {
            let client = Process()
            client.executableURL = URL(fileURLWithPath: uclient)
            client.arguments = ["-y", "-n", "2", "-p", "\(port)", "-u", username, "-w", password, "127.0.0.1"]
            client.standardOutput = FileHandle.nullDevice
            client.standardError = FileHandle.nullDevice
            try client.run()
            let deadline = Date().addingTimeInterval(20)
            while client.isRunning && Date() < deadline { usleep(20_000) }
            if client.isRunning {
                client.terminate()
                client.waitUntilExit()
                return -1
            }
            return client.terminationStatus
        }

        let configuration = TURNConfiguration(uris: ["turn:127.0.0.1:\(port)"], secret: secret, ttl: .seconds(600))
        let now = Int64(Date().timeIntervalSince1970)
        let good = TURNCredentials(userId: "AbCdEf1234", configuration: configuration, nowSeconds: now)
        XCTAssertEqual(try allocate(username: good.username, password: good.password), 0, "coturn refused a valid credential")
        XCTAssertNotEqual(try allocate(username: good.username, password: TURNCredentials.password(username: good.username, secret: "wrong")), 0,
                          "coturn accepted a password made with another secret")
        let expired = TURNCredentials(userId: "AbCdEf1234", configuration: configuration, nowSeconds: now - 3_600)
        XCTAssertLessThan(Int64(expired.username.split(separator: ":")[0])!, now)
        XCTAssertNotEqual(try allocate(username: expired.username, password: expired.password), 0, "coturn accepted an expired credential")
    }

    /// coturn on loopback with `secret`, once its log shows it listening. It cannot bind port 0 and
    /// report the port, and retries a taken one forever, so a free port is picked and, when its log
    /// says "Cannot bind" before "(admin thread)" (its last start-up line), the next is tried.
    static func startCoturn(_ turnserver: String, secret: String) throws -> (Process, Int) {
        let directory = NSTemporaryDirectory() + "parley-coturn-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for attempt in 0..<8 {
            let port = FreePort.next()
            let relayBase = 50_000 + Int(getpid() % 100) * 100
            let logPath = directory + "/turn-\(attempt).log"
            let server = Process()
            server.executableURL = URL(fileURLWithPath: turnserver)
            server.arguments = [
                "--use-auth-secret", "--static-auth-secret=\(secret)", "--realm", "parley", "-n",
                "--listening-ip", "127.0.0.1", "--relay-ip", "127.0.0.1", "--listening-port", "\(port)",
                "--min-port", "\(relayBase)", "--max-port", "\(relayBase + 99)",
                "--no-tls", "--no-dtls", "--no-cli", "--allow-loopback-peers", "--log-file", logPath, "--simple-log",
                "--pidfile", directory + "/turn.pid",
            ]
            server.standardOutput = FileHandle.nullDevice
            server.standardError = FileHandle.nullDevice
            try server.run()
            let deadline = Date().addingTimeInterval(30)
            var text = ""
            while Date() < deadline && server.isRunning {
                text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                if text.contains("Cannot bind") || text.contains("(admin thread)") { break }
                usleep(20_000)
            }
            if text.contains("(admin thread)") && !text.contains("Cannot bind") { return (server, port) }
            server.terminate()
            server.waitUntilExit()
            if !text.contains("Cannot bind") { throw CoturnDidNotStart(log: String(text.suffix(3000))) }
        }
        throw CoturnDidNotStart(log: "no free port in 8 attempts")
    }

    struct CoturnDidNotStart: Error, CustomStringConvertible {
        let log: String
        var description: String { "coturn did not start listening:\n\(log)" }
    }
}
