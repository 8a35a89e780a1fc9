@testable import ParleyIdentity
import ParleyJSON
import ParleyNet
import XCTest

/// Decoding and claim checks without a network.
final class TokenDecodingTests: XCTestCase {
    func testBase64URL() {
        XCTAssertEqual(Base64.encodeURL([0xfb, 0xff, 0xfe]), "-__-")
        XCTAssertEqual(Base64.decodeURL("-__-".utf8), [0xfb, 0xff, 0xfe])
        XCTAssertEqual(Base64.decodeURL("YQ".utf8), Array("a".utf8))
        XCTAssertNil(Base64.decodeURL("YQ==".utf8), "padding is not base64url")
        XCTAssertNil(Base64.decodeURL("YR".utf8), "nonzero trailing bits")
        XCTAssertNil(Base64.decodeURL("Y".utf8))
        XCTAssertNil(Base64.decodeURL("+/".utf8))
        XCTAssertEqual(Base64.decode("aGVsbG8=".utf8), Array("hello".utf8))
        XCTAssertNil(Base64.decode("aGVsbG8".utf8))
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            XCTAssertEqual(Base64.decodeURL(Base64.encodeURL(bytes).utf8), bytes)
            XCTAssertEqual(Base64.decode(Base64.encode(bytes).utf8), bytes)
        }
    }

    func testHeaderRules() {
        func token(_ header: String, _ payload: String = "{}", signature: String = "c2ln") -> String {
            Base64.encodeURL(Array(header.utf8)) + "." + Base64.encodeURL(Array(payload.utf8)) + "." + signature
        }
        XCTAssertNoThrow(try JSONWebToken(token(#"{"alg":"RS256","kid":"k"}"#)))
        for (what, text) in [
            ("alg none", token(#"{"alg":"none"}"#)), ("HS256", token(#"{"alg":"HS256"}"#)), ("no alg", token(#"{"kid":"k"}"#)),
            ("crit", token(#"{"alg":"RS256","crit":["exp"]}"#)), ("kid not a string", token(#"{"alg":"RS256","kid":1}"#)),
            ("empty signature", token(#"{"alg":"RS256"}"#, signature: "")), ("payload not an object", token(#"{"alg":"RS256"}"#, "[1]")),
            ("two parts", "a.b"), ("four parts", "a.b.c.d"),
        ] {
            XCTAssertThrowsError(try JSONWebToken(text), what)
        }
    }

    func testMaxAgeParsing() {
        XCTAssertEqual(JWKSCache.maxAge("public, max-age=21600, must-revalidate, no-transform"), 21600)
        XCTAssertEqual(JWKSCache.maxAge("Max-Age=\"60\""), 60)
        XCTAssertNil(JWKSCache.maxAge("no-cache"))
        XCTAssertNil(JWKSCache.maxAge("max-age=-1"))
        XCTAssertNil(JWKSCache.maxAge("max-age=99999999999999999999"))
    }

    func testECDSASignatureDER() {
        let r = [UInt8](repeating: 0x80, count: 32), s = [UInt8](repeating: 0, count: 31) + [1]
        let der = PublicKey.derECDSASignature(r: r, s: s)
        XCTAssertEqual(Array(der.prefix(4)), [0x30, 0x26, 0x02, 0x21])
        XCTAssertEqual(Array(der.suffix(3)), [0x02, 0x01, 0x01])
    }

    func testWeakOrMalformedKeysAreSkipped() {
        let small = Base64.encodeURL([UInt8](repeating: 0xC1, count: 128))
        let document = #"{"keys":[{"kty":"RSA","kid":"small","n":"\#(small)","e":"AQAB"},{"kty":"oct","k":"c2VjcmV0"},"#
            + #"{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"},{"kty":"RSA","use":"enc","n":"x","e":"AQAB"},7]}"#
        let set = JSONWebKeySet(document: Array(document.utf8))
        XCTAssertEqual(set?.keys.count, 0)
        XCTAssertEqual(set?.skipped, 5)
        XCTAssertNil(JSONWebKeySet(document: Array("[]".utf8)))
    }
}
