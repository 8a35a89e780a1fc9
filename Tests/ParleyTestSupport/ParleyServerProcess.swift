import Foundation

/// A real `parley serve` process on the port it bound (port 0, read back from `--port-file`),
/// backed by a fresh database on the test cluster.
public final class ParleyServerProcess: @unchecked Sendable {
    public let process: Process
    public let port: Int
    public let databaseURL: String
    public let logFile: URL

    /// The `parley` binary: `$PARLEY_BIN`, else the debug build of this package.
    public static var binaryPath: String {
        if let path = ProcessInfo.processInfo.environment["PARLEY_BIN"], !path.isEmpty { return path }
        return repositoryRoot.appendingPathComponent(".build/debug/parley").path
    }

    /// The repository root (two levels above this file's folder).
    public static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Starts a server with `arguments` added to `serve` and waits until `/ready` answers 200.
    /// `databaseURL` and `port` restart a server where an earlier one ran (clients reconnect);
    /// without `port` the server binds port 0 and reports the port it got.
    public init(arguments: [String] = [], environment: [String: String] = [:], databaseURL: String? = nil, port: Int? = nil) throws {
        let postgres = try TestPostgres.shared()
        self.databaseURL = try databaseURL ?? postgres.makeDatabase(prefix: "server")
        let name = "parley-\(UUID().uuidString)"
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent(name + ".log")
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent(name + ".port")
        defer { try? FileManager.default.removeItem(at: portFile) }
        FileManager.default.createFile(atPath: logFile.path, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: ParleyServerProcess.binaryPath)
        process.arguments = ["serve", "--host", "127.0.0.1", "--port", "\(port ?? 0)", "--port-file", portFile.path, "--threads", "2",
                             "--migrations-dir", ParleyServerProcess.repositoryRoot.appendingPathComponent("migrations").path] + arguments
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = self.databaseURL
        env["PARLEY_LOG_LEVEL"] = env["PARLEY_TEST_LOG_LEVEL"] ?? "info"
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let handle = try FileHandle(forWritingTo: logFile)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        self.port = try Self.boundPort(file: portFile, process: process, logFile: logFile)
        try waitUntilReady()
    }

    /// The port the server wrote to `file` once listening.
    private static func boundPort(file: URL, process: Process, logFile: URL, timeout: TimeInterval = 60) throws -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOf: file, encoding: .utf8), let port = Int(text.prefix { $0 != "\n" }) {
                return port
            }
            guard process.isRunning else {
                throw ServerProcessError.exited(status: process.terminationStatus, log: (try? String(contentsOf: logFile, encoding: .utf8)) ?? "")
            }
            usleep(20_000)
        }
        throw ServerProcessError.notReady(log: (try? String(contentsOf: logFile, encoding: .utf8)) ?? "")
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: logFile)
    }

    /// What the server logged so far.
    public var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    private func waitUntilReady(timeout: TimeInterval = 60) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard process.isRunning else {
                throw ServerProcessError.exited(status: process.terminationStatus, log: log)
            }
            if let response = try? TestHTTPClient(port: port).request("GET", "/ready"), response.status == 200 { return }
            usleep(50_000)
        }
        throw ServerProcessError.notReady(log: log)
    }

    /// Sends `signal` to the server.
    public func send(signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its status (nil on timeout).
    public func waitForExit(timeout: TimeInterval = 30) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        return process.isRunning ? nil : process.terminationStatus
    }
}

public enum ServerProcessError: Error, CustomStringConvertible {
    case exited(status: Int32, log: String)
    case notReady(log: String)

    public var description: String {
        switch self {
        case .exited(let status, let log): "parley exited with status \(status) before it was ready:\n\(log)"
        case .notReady(let log): "parley did not become ready:\n\(log)"
        }
    }
}
