import Foundation

/// A stand-in server written in Python (from the project's `.venv`), run as a real process: it
/// prints `PORT <n>` first, and exits when its stdin closes (on `stop` or when the test dies).
public final class PythonStandIn: @unchecked Sendable {
    public let process: Process
    public let port: Int
    private let stdin: Pipe
    private let stdout: Pipe

    /// Starts `Tests/integration/<script>` with `arguments` and waits for its `PORT` line.
    public init(script: String, arguments: [String] = [], timeout: TimeInterval = 30) throws {
        let root = ParleyServerProcess.repositoryRoot
        let python = root.appendingPathComponent(".venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else { throw StandInError.noVenv(python.path) }
        process = Process()
        process.executableURL = python
        process.arguments = [root.appendingPathComponent("Tests/integration/\(script)").path] + arguments
        stdin = Pipe()
        stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        let reader = stdout.fileHandleForReading
        while Date() < deadline {
            let byte = reader.readData(ofLength: 1)
            guard let first = byte.first else { break }
            if first == 10 { break }
            line.append(first)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
            process.terminate()
            throw StandInError.noPort(script: script, output: text)
        }
        self.port = port
    }

    deinit {
        stop()
    }

    /// Closes its stdin and waits for it to exit (terminating it after 5 s).
    public func stop() {
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// Sends a JSON request to the stand-in and returns its JSON answer.
    @discardableResult
    public func call(_ method: String, _ path: String, _ body: [String: Any]? = nil) throws -> [String: Any] {
        let client = try TestHTTPClient(port: port)
        let response: TestHTTPClient.Response
        if let body {
            let data = try JSONSerialization.data(withJSONObject: body)
            response = try client.request(method, path, json: String(decoding: data, as: UTF8.self))
        } else {
            response = try client.request(method, path)
        }
        guard response.status == 200, let object = response.json as? [String: Any] else {
            throw StandInError.badAnswer(path: path, status: response.status, body: response.text)
        }
        return object
    }

    public enum StandInError: Error, CustomStringConvertible {
        case noVenv(String)
        case noPort(script: String, output: String)
        case badAnswer(path: String, status: Int, body: String)

        public var description: String {
            switch self {
            case .noVenv(let path): "no \(path): run scripts/setup.sh --all"
            case .noPort(let script, let output): "\(script) printed no PORT line (got '\(output)')"
            case .badAnswer(let path, let status, let body): "\(path) answered \(status): \(body)"
            }
        }
    }
}
