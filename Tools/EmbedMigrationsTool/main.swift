// Host tool of the EmbedMigrations build plugin (runs at build time, so it may use Foundation):
// writes a Swift file holding the name and text of every migration file given, for ParleyMigrations.
//
// Usage: EmbedMigrationsTool OUTPUT.swift FILE.sql...
import Foundation

/// `text` as a one-line Swift string literal that evaluates to exactly the same scalars.
func swiftLiteral(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": out += "\\\\"
        case "\"": out += "\\\""
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            out += "\\u{" + String(scalar.value, radix: 16) + "}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("EmbedMigrationsTool: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let output = arguments.first else { fail("usage: EmbedMigrationsTool OUTPUT.swift FILE.sql...") }
let files = arguments.dropFirst().map { (name: ($0 as NSString).lastPathComponent, path: $0) }.sorted { $0.name < $1.name }
var entries: [String] = []
for file in files {
    guard let data = FileManager.default.contents(atPath: file.path) else { fail("cannot read \(file.path)") }
    guard !data.contains(0), let text = String(data: data, encoding: .utf8) else { fail("\(file.path) is not UTF-8 text without NUL bytes") }
    entries.append("    (\(swiftLiteral(file.name)), \(swiftLiteral(text))),")
}
let source = """
    // Generated at build time by the EmbedMigrations plugin from migrations/*.sql: do not edit.

    let generatedMigrationFiles: [(fileName: String, sql: String)] = [
    \(entries.joined(separator: "\n"))
    ]

    """
// Rewritten only when it changes, so an unchanged schema does not recompile ParleyMigrations.
if (try? String(contentsOfFile: output, encoding: .utf8)) != source {
    do {
        try source.write(toFile: output, atomically: true, encoding: .utf8)
    } catch {
        fail("cannot write \(output): \(error)")
    }
}
