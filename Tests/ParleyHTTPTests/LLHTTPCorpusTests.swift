import Foundation
import XCTest
@testable import ParleyHTTP

/// Runs llhttp's request corpus (/work/shared/testdata/llhttp, see its README) through Parley's
/// parser and checks that every disagreement is exactly one listed in docs/http.md.
final class LLHTTPCorpusTests: XCTestCase {
    struct Case {
        var file: String
        var name: String
        var input: [UInt8]
        var log: [String]

        var key: String { "\(file) | \(name)" }

        /// llhttp's outcome in the words docs/http.md uses.
        var llhttpOutcome: String {
            if let line = log.first(where: { $0.contains("error code=") }),
               let code = line.firstMatch(of: /error code=(\d+)/)?.1 {
                return "rejects (code \(code))"
            }
            return LLHTTPCorpusTests.requests(log.filter { $0.hasSuffix("message complete") }.count)
        }

        var llhttpRejects: Bool { log.contains { $0.contains("error code=") } }
    }

    static func requests(_ count: Int) -> String { count == 1 ? "1 request" : "\(count) requests" }

    /// Parley's outcome for one input, in the same words.
    static func parleyOutcome(_ events: [RecordedEvent]) -> (rejects: Bool, text: String) {
        let completed = events.filter { $0 == .end }.count
        for event in events {
            if case .error(let error) = event { return (true, "rejects (\(error.status.code))") }
        }
        let upgraded = events.contains { if case .upgraded = $0 { true } else { false } }
        return (false, requests(completed) + (upgraded ? ", then upgrade" : ""))
    }

    func testParleyAgreesWithLLHTTPExceptForTheDocumentedDifferences() throws {
        let cases = try Self.loadCorpus()
        XCTAssertGreaterThan(cases.count, 100, "the corpus should have well over 100 request cases")
        var differences: [String: (llhttp: String, parley: String)] = [:]
        var agreedRejections = 0
        for testCase in cases {
            let events = ParserDriver.whole(testCase.input)
            XCTAssertEqual(ParserDriver.byteByByte(testCase.input), events, "\(testCase.key): split byte by byte")
            let parley = Self.parleyOutcome(events)
            let agree: Bool
            if testCase.llhttpRejects {
                agree = parley.rejects
                if agree { agreedRejections += 1 }
            } else {
                agree = !parley.rejects && parley.text == testCase.llhttpOutcome
            }
            if !agree {
                differences[testCase.key] = (testCase.llhttpOutcome, parley.text)
            }
        }
        XCTAssertGreaterThan(agreedRejections, 40)

        let documented = try Self.documentedDifferences()
        for (key, outcome) in differences.sorted(by: { $0.key < $1.key }) {
            guard let listed = documented[key] else {
                XCTFail("undocumented difference \(key): llhttp \(outcome.llhttp), Parley \(outcome.parley)")
                continue
            }
            XCTAssertEqual(listed.llhttp, outcome.llhttp, "docs/http.md llhttp column for \(key)")
            XCTAssertEqual(listed.parley, outcome.parley, "docs/http.md Parley column for \(key)")
            XCTAssertFalse(listed.reason.isEmpty, "docs/http.md gives no reason for \(key)")
        }
        for key in documented.keys.sorted() where differences[key] == nil {
            XCTFail("docs/http.md lists \(key) as a difference, but Parley now agrees with llhttp")
        }
    }

    func testNormalisationFollowsTheReadme() {
        XCTAssertEqual(Self.normalise("A\\\nB\nC\\r\\n\\t\\f"), Array("AB\r\nC\r\n\t\u{0C}".utf8))
        XCTAssertEqual(Self.normalise("\\x41\\101\\01"), Array("AA\u{01}".utf8))
        XCTAssertEqual(Self.normalise("\\xff"), Array("\u{FF}".utf8))
        XCTAssertEqual(Self.normalise("${\"ab\".repeat(3)}-${'x'.repeat(2)}"), Array("ababab-xx".utf8))
    }

    // MARK: - Corpus loading

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// `shared/` lives beside the repository root (/work/shared for /work/main and its worktrees);
    /// `PARLEY_TEST_SHARED` overrides it, as in scripts/test.sh.
    static var corpusDirectory: URL {
        let shared = ProcessInfo.processInfo.environment["PARLEY_TEST_SHARED"].map { URL(fileURLWithPath: $0) }
            ?? repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared")
        return shared.appendingPathComponent("testdata/llhttp/requests")
    }

    static func loadCorpus() throws -> [Case] {
        let directory = corpusDirectory
        let files = try? FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".md") }.sorted()
        guard let files, !files.isEmpty else {
            XCTFail("llhttp corpus missing: expected the .md files of nodejs/llhttp test/request in \(directory.path)")
            throw CocoaError(.fileNoSuchFile)
        }
        var cases: [Case] = []
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            let parsed = parse(markdown: text, file: file)
            let declared = text.matches(of: /"type"\s*:\s*"request"/).count
            XCTAssertEqual(parsed.count, declared, "\(file): every \"request\" case must be read")
            cases += parsed
        }
        return cases
    }

    /// Splits one llhttp markdown file into its `"type": "request"` cases.
    static func parse(markdown: String, file: String) -> [Case] {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var cases: [Case] = []
        var heading = ""
        var seen: [String: Int] = [:]
        var index = 0
        func block(_ language: String, from start: Int) -> (body: [String], next: Int)? {
            var position = start
            while position < lines.count, lines[position] != "```\(language)" {
                if lines[position].hasPrefix("<!-- meta=") { return nil }
                position += 1
            }
            guard position < lines.count else { return nil }
            var end = position + 1
            while end < lines.count, lines[end] != "```" { end += 1 }
            return (Array(lines[(position + 1)..<end]), end + 1)
        }
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix("#") {
                heading = line.drop(while: { $0 == "#" }).trimmingCharacters(in: .whitespaces)
                index += 1
                continue
            }
            guard line.hasPrefix("<!-- meta="), let type = line.firstMatch(of: /"type"\s*:\s*"([^"]+)"/)?.1 else {
                index += 1
                continue
            }
            guard let http = block("http", from: index + 1), let log = block("log", from: http.next) else {
                index += 1
                continue
            }
            index = log.next
            guard type == "request" else { continue }
            seen[heading, default: 0] += 1
            let name = seen[heading]! > 1 ? "\(heading) (\(seen[heading]!))" : heading
            cases.append(Case(file: file, name: name, input: normalise(http.body.joined(separator: "\n")), log: log.body))
        }
        return cases
    }

    /// The README's normalisation: line continuations, CRLF line ends, escapes, `${…}` expressions.
    /// The trailing newline is already gone because the block's lines were joined without one.
    static func normalise(_ block: String) -> [UInt8] {
        var text = block.replacing(/\\(\r\n|\r|\n)/, with: "")
        text = text.replacing(/\r\n|\r|\n/, with: "\r\n")
        text = text.replacing("\\r", with: "\r")
        text = text.replacing("\\n", with: "\n")
        text = text.replacing("\\t", with: "\t")
        text = text.replacing("\\f", with: "\u{0C}")
        text = text.replacing(/\\x([0-9a-fA-F]+)/) { match in
            String(UnicodeScalar(UInt32(match.1, radix: 16)! & 0xFFFF).map(Character.init) ?? "\u{FFFD}")
        }
        text = text.replacing(/\\([0-7]{1,3})/) { match in
            String(Character(UnicodeScalar(UInt32(match.1, radix: 8)!)!))
        }
        text = text.replacing(/\$\{(.+?)\}/) { match in
            evaluate(String(match.1))
        }
        // JavaScript strings reach llhttp UTF-8 encoded (the corpus logs count `ÿ` as two bytes).
        return Array(text.utf8)
    }

    /// The one JavaScript form such corpora use: `"s".repeat(n)` (either quote style).
    static func evaluate(_ expression: String) -> String {
        if let match = expression.firstMatch(of: /^\s*(["'])(.*)\1\.repeat\((\d+)\)\s*$/) {
            return String(repeating: String(match.2), count: Int(match.3)!)
        }
        XCTFail("unsupported JavaScript expression in the corpus: ${\(expression)}")
        return ""
    }

    // MARK: - docs/http.md

    /// Rows of the table between the `llhttp-differences` markers: file | case | llhttp | Parley | reason.
    static func documentedDifferences() throws -> [String: (llhttp: String, parley: String, reason: String)] {
        let docs = repositoryRoot.appendingPathComponent("docs/http.md")
        guard let text = try? String(contentsOf: docs, encoding: .utf8) else {
            XCTFail("missing \(docs.path)")
            throw CocoaError(.fileNoSuchFile)
        }
        guard let begin = text.range(of: "<!-- llhttp-differences:begin -->"),
              let end = text.range(of: "<!-- llhttp-differences:end -->") else {
            XCTFail("docs/http.md has no llhttp-differences markers")
            throw CocoaError(.fileReadCorruptFile)
        }
        var rows: [String: (llhttp: String, parley: String, reason: String)] = [:]
        for line in text[begin.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("|") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                .dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 5, cells[0] != "File", !cells[0].hasPrefix("-") else { continue }
            let key = "\(cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))) | \(cells[1])"
            XCTAssertNil(rows[key], "docs/http.md lists \(key) twice")
            rows[key] = (cells[2], cells[3], cells[4])
        }
        return rows
    }
}
