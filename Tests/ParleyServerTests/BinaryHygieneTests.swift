import Foundation
import XCTest

/// Keeps every module under Sources/ free of Foundation and SwiftNIO, which Parley does not
/// link (scripts/test.sh also checks the release binaries with ldd). The one exemption is
/// Sources/ParleyKitApple (ParleyKit's URLSession transport and CallKit glue), whose files must
/// be wholly inside `#if canImport(Darwin)`, so on Linux it compiles to nothing.
final class BinaryHygieneTests: XCTestCase {
    func testSourcesImportNeitherFoundationNorNIO() throws {
        let sources = Self.repositoryRoot.appendingPathComponent("Sources", isDirectory: true)
        let files = try Self.swiftFiles(under: sources)
        XCTAssertFalse(files.isEmpty, "no Swift files found under \(sources.path)")

        var offenders: [String] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            let relativePath = String(file.path.dropFirst(Self.repositoryRoot.path.count + 1))
            if relativePath.hasPrefix("Sources/ParleyKitApple/") {
                let code = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { !$0.isEmpty && !$0.hasPrefix("//") }
                if code.first != "#if canImport(Darwin)" || code.last != "#endif" {
                    offenders.append("\(relativePath): the Apple-only target's files must be wholly inside #if canImport(Darwin)")
                }
                continue
            }
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where ForbiddenImport.module(in: line) != nil {
                offenders.append("\(relativePath):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        XCTAssertTrue(
            offenders.isEmpty,
            "Sources/ must not import Foundation, FoundationEssentials or NIO:\n" + offenders.joined(separator: "\n")
        )
    }

    func testDetectorFindsEveryImportForm() {
        XCTAssertEqual(ForbiddenImport.module(in: "import Foundation"), "Foundation")
        XCTAssertEqual(ForbiddenImport.module(in: "  import FoundationEssentials"), "FoundationEssentials")
        XCTAssertEqual(ForbiddenImport.module(in: "@preconcurrency import NIOCore"), "NIOCore")
        XCTAssertEqual(ForbiddenImport.module(in: "@_implementationOnly import Foundation"), "Foundation")
        XCTAssertEqual(ForbiddenImport.module(in: "internal import struct FoundationEssentials.Date"), "FoundationEssentials")
        XCTAssertEqual(ForbiddenImport.module(in: "public import NIO;"), "NIO")
        XCTAssertEqual(ForbiddenImport.module(in: "import\tCoreFoundation"), "CoreFoundation")
        XCTAssertEqual(ForbiddenImport.module(in: "import _NIOBase64"), "_NIOBase64")
    }

    func testDetectorIgnoresAllowedModulesAndNonImports() {
        XCTAssertNil(ForbiddenImport.module(in: "import Glibc"))
        XCTAssertNil(ForbiddenImport.module(in: "import Synchronization"))
        XCTAssertNil(ForbiddenImport.module(in: "@testable import ParleyNet"))
        XCTAssertNil(ForbiddenImport.module(in: "// import Foundation"))
        XCTAssertNil(ForbiddenImport.module(in: "let text = \"import Foundation\""))
        XCTAssertNil(ForbiddenImport.module(in: "importFoundation()"))
        XCTAssertNil(ForbiddenImport.module(in: ""))
    }

    /// The repository root: this file is Tests/ParleyServerTests/BinaryHygieneTests.swift.
    private static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    private static func swiftFiles(under directory: URL) throws -> [URL] {
        guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: directory.path])
        }
        var files: [URL] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            files.append(url)
        }
        return files.sorted { $0.path < $1.path }
    }
}

/// Recognises an import declaration of a module Parley's sources must not use.
private enum ForbiddenImport {
    private static let accessModifiers: Set<Substring> = ["public", "package", "internal", "fileprivate", "private"]
    private static let declarationKinds: Set<Substring> = ["typealias", "struct", "class", "enum", "protocol", "let", "var", "func"]

    /// The forbidden module that `line` imports, or nil when it imports none.
    static func module(in line: Substring) -> String? {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })[...]
        while let first = words.first, first.hasPrefix("@") {
            words = words.dropFirst()
        }
        if let first = words.first, accessModifiers.contains(first) {
            words = words.dropFirst()
        }
        guard words.first == "import" else { return nil }
        words = words.dropFirst()
        if let first = words.first, declarationKinds.contains(first) {
            words = words.dropFirst()
        }
        guard let path = words.first else { return nil }
        let module = String(path.prefix(while: { $0 != "." && $0 != ";" }))
        return isForbidden(module) ? module : nil
    }

    static func module(in line: String) -> String? {
        module(in: line[...])
    }

    private static func isForbidden(_ module: String) -> Bool {
        let trimmed = module.hasPrefix("_") ? String(module.dropFirst()) : module
        return trimmed.hasPrefix("Foundation") || trimmed == "CoreFoundation" || trimmed.hasPrefix("NIO")
    }
}
