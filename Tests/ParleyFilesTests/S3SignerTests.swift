import ParleyFiles
import ParleyHTTP
import XCTest

/// AWS Signature V4 against AWS's published S3 example, and the URLs of both addressing styles.
final class S3SignerTests: XCTestCase {
    /// "Example: GET Object" of AWS's "Signature Calculations for the Authorization Header".
    func testTheSignatureMatchesAWSsGetObjectExample() {
        let signer = S3Signer(accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region: "us-east-1")
        let authorization = signer.authorization(
            method: "GET", path: "/test.txt", query: [],
            headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
                      ("x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
                      ("x-amz-date", "20130524T000000Z")],
            payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", amzDate: "20130524T000000Z")
        XCTAssertEqual(authorization, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        let changed = signer.authorization(
            method: "GET", path: "/test.txt", query: [],
            headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-10"),
                      ("x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
                      ("x-amz-date", "20130524T000000Z")],
            payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", amzDate: "20130524T000000Z")
        XCTAssertNotEqual(changed, authorization, "a signed header is covered")
    }

    /// "Example: GET Bucket Lifecycle": a query parameter without a value signs as `lifecycle=`.
    func testAQueryParameterWithoutAValueSignsWithAnEmptyValue() {
        let signer = S3Signer(accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region: "us-east-1")
        let authorization = signer.authorization(
            method: "GET", path: "/", query: [("lifecycle", "")],
            headers: [("Host", "examplebucket.s3.amazonaws.com"),
                      ("x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
                      ("x-amz-date", "20130524T000000Z")],
            payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", amzDate: "20130524T000000Z")
        XCTAssertTrue(authorization.hasSuffix("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"), authorization)
    }

    func testKeysAreEncodedAsSigV4Asks() {
        XCTAssertEqual(S3Signer.encode("0f_a b@c~d.png"), "0f_a%20b%40c~d.png")
        XCTAssertEqual(S3Signer.encode("a/b", keepSlash: true), "a/b")
        XCTAssertEqual(S3Signer.encode("a/b"), "a%2Fb")
    }

    func testTheSigningDateIsISO8601BasicInUTC() {
        XCTAssertEqual(HTTPDate.iso8601Basic(secondsSinceEpoch: 1_369_353_600), "20130524T000000Z")
        XCTAssertEqual(HTTPDate.iso8601Basic(secondsSinceEpoch: 951_782_399), "20000228T235959Z")
        XCTAssertEqual(HTTPDate.parse("Fri, 24 May 2013 00:00:00 GMT"), 1_369_353_600)
        XCTAssertEqual(HTTPDate.parse(HTTPDate.format(secondsSinceEpoch: 1_798_000_123)), 1_798_000_123)
        XCTAssertNil(HTTPDate.parse("yesterday"))
        XCTAssertNil(HTTPDate.parse("Fri, 24 Foo 2013 00:00:00 GMT"))
    }
}
