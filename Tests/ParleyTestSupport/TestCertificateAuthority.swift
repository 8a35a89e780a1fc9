import Foundation

/// A throwaway CA and leaf certificates made by the `openssl` command in a temporary directory.
public final class TestCertificateAuthority: @unchecked Sendable {
    public let directory: URL
    public var caCertificate: String { directory.appendingPathComponent("ca.pem").path }

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Parley Test CA"])
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Issues a leaf for `name` (and `alsoNames`: DNS names, or IP addresses) signed by this CA
    /// (or self-signed); an expired one ended yesterday.
    public func issue(name: String, alsoNames: [String] = [], selfSigned: Bool = false, expired: Bool = false) throws -> (certificate: String, key: String) {
        let base = "\(name)-\(selfSigned ? "self" : "ca")-\(expired ? "expired" : "valid")-\(UUID().uuidString.prefix(8))"
        let entries = ([name] + alsoNames).map { $0.first!.isNumber || $0.contains(":") ? "IP:\($0)" : "DNS:\($0)" }
        try "subjectAltName=\(entries.joined(separator: ","))\n".write(to: directory.appendingPathComponent("\(base).ext"), atomically: true, encoding: .utf8)
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "\(base).key", "-out", "\(base).csr", "-subj", "/CN=\(name)"])
        let signer = selfSigned ? ["-signkey", "\(base).key"] : ["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"]
        let validity = ["-days", expired ? "-1" : "2"]
        try openssl(["x509", "-req", "-in", "\(base).csr", "-out", "\(base).pem", "-extfile", "\(base).ext"] + signer + validity)
        return (directory.appendingPathComponent("\(base).pem").path, directory.appendingPathComponent("\(base).key").path)
    }

    struct OpenSSLFailed: Error, CustomStringConvertible {
        let arguments: [String]
        var description: String { "openssl \(arguments.joined(separator: " ")) failed" }
    }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw OpenSSLFailed(arguments: arguments) }
    }
}
