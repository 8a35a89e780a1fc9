import COpenSSL

/// A public key in OpenSSL (`EVP_PKEY`), built from a JWK's RSA modulus and exponent or EC point.
///
/// Immutable after creation; OpenSSL allows concurrent verifications with one key (each uses its
/// own `EVP_MD_CTX`), hence `@unchecked Sendable`.
public final class PublicKey: @unchecked Sendable {
    private let key: OpaquePointer

    private init(key: OpaquePointer) {
        self.key = key
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// Smallest RSA modulus accepted, in bits.
    public static let minimumRSABits = 2048
    /// Largest RSA modulus accepted, in bits (bounds the work of one verification).
    public static let maximumRSABits = 8192

    /// An RSA public key from big-endian modulus and exponent; nil if OpenSSL refuses it or the
    /// modulus is outside 2048...8192 bits.
    public static func rsa(modulus: [UInt8], exponent: [UInt8]) -> PublicKey? {
        let modulus = Array(modulus.drop { $0 == 0 })
        let exponent = Array(exponent.drop { $0 == 0 })
        let bits = modulus.count * 8 - (modulus.first.map { $0.leadingZeroBitCount } ?? 0)
        guard bits >= minimumRSABits, bits <= maximumRSABits, !exponent.isEmpty, exponent.count <= 8 else { return nil }
        guard let n = BN_bin2bn(modulus, Int32(modulus.count), nil) else { return nil }
        defer { BN_free(n) }
        guard let e = BN_bin2bn(exponent, Int32(exponent.count), nil) else { return nil }
        defer { BN_free(e) }
        return fromData(type: "RSA") { builder, memory in
            OSSL_PARAM_BLD_push_BN(builder, memory.string("n"), n) == 1 && OSSL_PARAM_BLD_push_BN(builder, memory.string("e"), e) == 1
        }
    }

    /// An EC public key on `curve` (`P-256` or `P-384`) from its affine coordinates; nil if the
    /// point is not on the curve or the coordinates have the wrong length.
    public static func ec(curve: String, x: [UInt8], y: [UInt8]) -> PublicKey? {
        let group: String
        let length: Int
        switch curve {
        case "P-256": (group, length) = ("prime256v1", 32)
        case "P-384": (group, length) = ("secp384r1", 48)
        default: return nil
        }
        guard x.count == length, y.count == length else { return nil }
        let point = [0x04] + x + y
        return fromData(type: "EC") { builder, memory in
            OSSL_PARAM_BLD_push_utf8_string(builder, memory.string("group"), memory.string(group), 0) == 1
                && OSSL_PARAM_BLD_push_octet_string(builder, memory.string("pub"), memory.bytes(point), point.count) == 1
        }
    }

    /// Memory for the parameter builder, which keeps pointers to names and values (not copies)
    /// until `OSSL_PARAM_BLD_to_param`.
    private final class BuilderMemory {
        private var blocks: [UnsafeMutableRawPointer] = []

        deinit {
            for block in blocks { block.deallocate() }
        }

        func string(_ text: String) -> UnsafePointer<CChar> {
            let utf8 = Array(text.utf8CString)
            let block = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
            block.initialize(from: utf8, count: utf8.count)
            blocks.append(UnsafeMutableRawPointer(block))
            return UnsafePointer(block)
        }

        func bytes(_ bytes: [UInt8]) -> UnsafeRawPointer {
            let block = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            block.copyMemory(from: bytes, byteCount: bytes.count)
            blocks.append(block)
            return UnsafeRawPointer(block)
        }
    }

    private static func fromData(type: String, _ push: (OpaquePointer, BuilderMemory) -> Bool) -> PublicKey? {
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        let memory = BuilderMemory()
        guard push(builder, memory), let params = withExtendedLifetime(memory, { OSSL_PARAM_BLD_to_param(builder) }) else { return nil }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1, EVP_PKEY_fromdata(context, &key, parley_EVP_PKEY_PUBLIC_KEY(), params) == 1,
              let key
        else { return nil }
        let made = PublicKey(key: key)
        // fromdata does not check that an EC point lies on the curve; a public-key check does.
        if type == "EC" {
            guard let check = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { return nil }
            defer { EVP_PKEY_CTX_free(check) }
            guard EVP_PKEY_public_check(check) == 1 else { return nil }
        }
        return made
    }

    /// Whether `signature` (a JWS signature: PKCS#1 v1.5 for RSA, r‖s for ECDSA) signs
    /// `message` under this key with `algorithm`. Takes tens of microseconds: fine on a loop.
    public func verify(signature: [UInt8], message: [UInt8], algorithm: SignatureAlgorithm) -> Bool {
        var der = signature
        if let component = algorithm.ecdsaComponentBytes {
            guard signature.count == component * 2 else { return false }
            der = Self.derECDSASignature(r: Array(signature[..<component]), s: Array(signature[component...]))
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, algorithm.digest, nil, key) == 1 else { return false }
        let result = der.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { msg in
                EVP_DigestVerify(context, sig.baseAddress, sig.count, msg.baseAddress, msg.count)
            }
        }
        ERR_clear_error()
        return result == 1
    }

    /// `SEQUENCE { INTEGER r, INTEGER s }` in DER, as OpenSSL verifies ECDSA signatures.
    static func derECDSASignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        // r and s are at most 66 bytes each, so the body fits a one- or two-byte length.
        return body.count < 0x80 ? [0x30, UInt8(body.count)] + body : [0x30, 0x81, UInt8(body.count)] + body
    }
}
