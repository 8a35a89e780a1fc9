import Foundation
import ParleyTestSupport

/// The aiosmtpd stand-in (Tests/integration/smtp_standin.py) as a real process.
final class SMTPStandIn: @unchecked Sendable {
    let server: PythonStandIn
    let smtpPort: Int
    /// The implicit-TLS port when started with a certificate (the SMTP port then offers STARTTLS).
    let smtpsPort: Int?

    init(tls: (certificate: String, key: String)? = nil) throws {
        server = try PythonStandIn(script: "smtp_standin.py", arguments: tls.map { ["--tls", $0.certificate, $0.key] } ?? [])
        let state = try server.call("GET", "/control/state")
        smtpPort = state["smtp_port"] as! Int
        smtpsPort = state["smtps_port"] as? Int
    }

    func stop() { server.stop() }

    func configure(_ behaviour: [String: Any]) throws {
        try server.call("POST", "/control/behaviour", behaviour)
    }

    /// Messages received: (from, to, raw data).
    func messages() throws -> [(from: String, to: [String], data: String)] {
        let list = try server.call("GET", "/control/state")["messages"] as? [[String: Any]] ?? []
        return list.map { ($0["from"] as? String ?? "", $0["to"] as? [String] ?? [], $0["data"] as? String ?? "") }
    }

    /// For each message received, whether it came over TLS.
    func messagesOverTLS() throws -> [Bool] {
        let list = try server.call("GET", "/control/state")["messages"] as? [[String: Any]] ?? []
        return list.map { $0["tls"] as? Bool ?? false }
    }

    func sessions() throws -> Int { try server.call("GET", "/control/state")["sessions"] as? Int ?? 0 }

    /// Polls until `condition` holds (the event), failing after `timeout`.
    func waitUntil(_ what: String, timeout: Duration = .seconds(15), _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw WaitError(what: what)
    }

    struct WaitError: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting until \(what)" }
    }
}
