import Foundation
import ParleyNet
import ParleyTestSupport
import XCTest
@testable import ParleyWebSocket

/// Runs the Autobahn|Testsuite cases (through `kosoku`, from the project venv) against the echo
/// server: sections 1–7, 9 and 10 must all pass (OK, NON-STRICT or INFORMATIONAL).
///
/// `PARLEY_AUTOBAHN_CASES` (comma-separated globs, e.g. `5.*,6.4.*`) narrows the run while debugging.
final class AutobahnTests: XCTestCase {
    static let sections = ["1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"]
    static let acceptedBehaviors: Set<String> = ["OK", "NON-STRICT", "INFORMATIONAL"]
    static let acceptedCloseBehaviors: Set<String> = ["OK", "INFORMATIONAL"]

    func testAutobahnConformance() throws {
        try runAutobahn(tls: false)
    }

    /// The same cases over WSS: kosoku speaks plain TCP to a relay (`tls_relay.py`) that opens
    /// a verified TLS connection to the echo server's TLS listener, so every frame crosses
    /// Parley's TLS layer both ways.
    func testAutobahnConformanceOverTLS() throws {
        try runAutobahn(tls: true)
    }

    private func runAutobahn(tls: Bool) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let kosoku = try Self.kosoku(root: root)

        // Section 9 sends messages of up to 16 MiB and expects them echoed whole.
        let configuration = WebSocketHandler.Configuration(
            limits: .init(maxFrameSize: 20 << 20, maxMessageSize: 20 << 20),
            maxPendingOutboundBytes: 64 << 20)
        var authority: TestCertificateAuthority?
        var context: TLSServerContext?
        if tls {
            let made = try TestCertificateAuthority()
            let leaf = try made.issue(name: "echo.parley.test")
            context = try TLSServerContext(certificates: [.init(chainFile: leaf.certificate, keyFile: leaf.key)])
            authority = made
        }
        let server = try EchoServer(configuration: configuration, maxOutboundBytes: 64 << 20, tls: context)
        defer { server.shutdown() }
        let relay = try authority.map { try PythonStandIn(script: "tls_relay.py", arguments: ["\(server.port)", "echo.parley.test", $0.caCertificate]) }
        defer { relay?.stop() }

        let reports = root.appendingPathComponent(tls ? ".build/autobahn-reports-tls" : ".build/autobahn-reports")
        try? FileManager.default.removeItem(at: reports)
        let selection = ProcessInfo.processInfo.environment["PARLEY_AUTOBAHN_CASES"].map { $0.split(separator: ",").map(String.init) } ?? Self.sections
        var arguments = ["127.0.0.1:\(relay?.port ?? server.port)", "-o", reports.path]
        for glob in selection { arguments += ["-i", glob] }
        arguments += ["-x", "12.*", "-x", "13.*"]

        let status = try Self.run(kosoku, arguments: arguments, timeout: 900)
        XCTAssertNotNil(status, "kosoku did not finish within 15 minutes")

        let index = reports.appendingPathComponent("index.json")
        let data = try Data(contentsOf: index)
        let agents = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: [String: [String: Any]]])
        var total = 0
        var failures: [String] = []
        var counts: [String: Int] = [:]
        for (_, cases) in agents {
            for (id, result) in cases {
                total += 1
                let behavior = result["behavior"] as? String ?? "?"
                let close = result["behaviorClose"] as? String ?? "?"
                counts[behavior, default: 0] += 1
                if !Self.acceptedBehaviors.contains(behavior) || !Self.acceptedCloseBehaviors.contains(close) {
                    failures.append("\(id): \(behavior) (close: \(close))")
                }
            }
        }
        print("Autobahn\(tls ? " over TLS" : ""): \(total) cases, \(counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); reports in \(reports.path)")
        if ProcessInfo.processInfo.environment["PARLEY_AUTOBAHN_CASES"] == nil {
            XCTAssertGreaterThan(total, 290, "sections 1–7, 9, 10 hold about 300 cases")
        } else {
            XCTAssertGreaterThan(total, 0)
        }
        let sorted = failures.sorted { $0.compare($1, options: .numeric) == .orderedAscending }
        XCTAssert(failures.isEmpty, "\(failures.count) Autobahn cases failed:\n" + sorted.joined(separator: "\n"))
        if failures.isEmpty { XCTAssertEqual(status, 0, "kosoku exited with \(status ?? -1)") }
    }

    /// `.venv/bin/kosoku`, creating the venv with the pinned version if scripts/setup.sh has not.
    static func kosoku(root: URL) throws -> URL {
        let venv = root.appendingPathComponent(".venv")
        let kosoku = venv.appendingPathComponent("bin/kosoku")
        if FileManager.default.isExecutableFile(atPath: kosoku.path) { return kosoku }
        var pin = "kosoku==0.1.0"
        if let requirements = try? String(contentsOf: root.appendingPathComponent("scripts/requirements-test.txt"), encoding: .utf8),
           let line = requirements.split(separator: "\n").first(where: { $0.hasPrefix("kosoku==") }) {
            pin = String(line.split(separator: " ")[0])
        }
        let python = URL(fileURLWithPath: "/usr/bin/env")
        XCTAssertEqual(try run(python, arguments: ["python3", "-m", "venv", venv.path], timeout: 120), 0, "python3 -m venv failed")
        XCTAssertEqual(try run(venv.appendingPathComponent("bin/pip"), arguments: ["install", "-q", pin], timeout: 300), 0, "pip install \(pin) failed")
        guard FileManager.default.isExecutableFile(atPath: kosoku.path) else {
            throw SetupError(message: "cannot install \(pin) into \(venv.path)")
        }
        return kosoku
    }

    struct SetupError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// Runs a program, killing it after `timeout` seconds; returns its exit status or nil on timeout.
    static func run(_ executable: URL, arguments: [String], timeout: TimeInterval) throws -> Int32? {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }
}
