import Foundation
import ParleyJSON
import XCTest

/// Runs Nicolas Seriot's JSONTestSuite corpus (test_parsing) against the parser.
final class JSONTestSuiteTests: XCTestCase {
    /// The corpus lives in `shared/testdata` beside the repository (or `$PARLEY_TEST_SHARED`).
    static let corpusDirectory = (ProcessInfo.processInfo.environment["PARLEY_TEST_SHARED"].map { URL(fileURLWithPath: $0) }
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../shared"))
        .appendingPathComponent("testdata/JSONTestSuite/test_parsing")
        .standardizedFileURL

    /// Every `i_` (implementation-defined) file and our answer; docs/json.md lists the reasons.
    static let implementationDefined: [String: Bool] = [
        "i_number_double_huge_neg_exp.json": true,
        "i_number_huge_exp.json": false,
        "i_number_neg_int_huge_exp.json": false,
        "i_number_pos_double_huge_exp.json": false,
        "i_number_real_neg_overflow.json": false,
        "i_number_real_pos_overflow.json": false,
        "i_number_real_underflow.json": true,
        "i_number_too_big_neg_int.json": true,
        "i_number_too_big_pos_int.json": true,
        "i_number_very_big_negative_int.json": true,
        "i_object_key_lone_2nd_surrogate.json": false,
        "i_string_1st_surrogate_but_2nd_missing.json": false,
        "i_string_1st_valid_surrogate_2nd_invalid.json": false,
        "i_string_UTF-16LE_with_BOM.json": false,
        "i_string_UTF-8_invalid_sequence.json": false,
        "i_string_UTF8_surrogate_U+D800.json": false,
        "i_string_incomplete_surrogate_and_escape_valid.json": false,
        "i_string_incomplete_surrogate_pair.json": false,
        "i_string_incomplete_surrogates_escape_valid.json": false,
        "i_string_invalid_lonely_surrogate.json": false,
        "i_string_invalid_surrogate.json": false,
        "i_string_invalid_utf-8.json": false,
        "i_string_inverted_surrogates_U+1D11E.json": false,
        "i_string_iso_latin_1.json": false,
        "i_string_lone_second_surrogate.json": false,
        "i_string_lone_utf8_continuation_byte.json": false,
        "i_string_not_in_unicode_range.json": false,
        "i_string_overlong_sequence_2_bytes.json": false,
        "i_string_overlong_sequence_6_bytes.json": false,
        "i_string_overlong_sequence_6_bytes_null.json": false,
        "i_string_truncated-utf-8.json": false,
        "i_string_utf16BE_no_BOM.json": false,
        "i_string_utf16LE_no_BOM.json": false,
        "i_structure_500_nested_arrays.json": false,
        "i_structure_UTF-8_BOM_empty_object.json": false,
    ]

    private func corpus(prefix: String) throws -> [(name: String, bytes: [UInt8])] {
        let directory = Self.corpusDirectory.path
        guard FileManager.default.fileExists(atPath: directory) else {
            XCTFail("JSONTestSuite corpus not found at \(directory); it must sit in shared/testdata beside the repository")
            return []
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }
            .sorted()
        XCTAssertFalse(names.isEmpty, "no \(prefix)*.json files in \(directory)")
        return try names.map { name in
            let data = try Data(contentsOf: Self.corpusDirectory.appendingPathComponent(name))
            return (name, [UInt8](data))
        }
    }

    func testEveryYFileIsAccepted() throws {
        let files = try corpus(prefix: "y_")
        for file in files {
            do {
                _ = try JSONParser().parse(file.bytes)
            } catch {
                XCTFail("\(file.name) rejected: \(error)")
            }
        }
    }

    func testEveryNFileIsRejected() throws {
        let files = try corpus(prefix: "n_")
        for file in files {
            if let value = try? JSONParser().parse(file.bytes) {
                XCTFail("\(file.name) accepted as \(value)")
            }
        }
    }

    func testEveryIFileGetsItsDocumentedAnswer() throws {
        let files = try corpus(prefix: "i_")
        for file in files {
            guard let expected = Self.implementationDefined[file.name] else {
                XCTFail("\(file.name) is new: decide, add it here and to docs/json.md")
                continue
            }
            let accepted = (try? JSONParser().parse(file.bytes)) != nil
            XCTAssertEqual(accepted, expected, file.name)
        }
        XCTAssertEqual(files.count, Self.implementationDefined.count, "an i_ file listed here is missing from the corpus")
    }

    func testFiveHundredNestedArraysParseWithARaisedDepthLimit() throws {
        let file = try XCTUnwrap(try corpus(prefix: "i_structure_500_nested_arrays").first)
        XCTAssertNoThrow(try JSONParser(maxDepth: 500).parse(file.bytes))
        XCTAssertThrowsError(try JSONParser(maxDepth: 499).parse(file.bytes))
    }

    func testAcceptedYFilesRoundTrip() throws {
        let files = try corpus(prefix: "y_")
        for file in files {
            guard let value = try? JSONParser().parse(file.bytes) else { continue }
            let reparsed = try JSONParser().parse(value.serialized())
            // NaN never appears in parsed input, so every value equals itself.
            XCTAssertEqual(reparsed, value, file.name)
        }
    }
}
