import CSodium
import ParleyNet

/// argon2id password hashing (libsodium's `crypto_pwhash_str`), run on a `BlockingPool`.
///
/// Hashes are self-describing PHC strings (`$argon2id$v=19$m=…,t=…,p=1$…`), so changing the
/// parameters later still verifies old hashes. Every call costs tens of milliseconds of CPU and
/// `memoryLimit` bytes of memory: it never runs on an event loop.
public struct PasswordHasher: Sendable {
    /// The answer when `maxPendingJobs` argon2id jobs are already queued or running.
    public static let busy = ParseError.tooManyLogins

    /// Longest password accepted, in UTF-8 bytes.
    public static let maxPasswordBytes = 4096

    /// argon2id passes (`opslimit`).
    public let operationsLimit: Int
    /// argon2id memory in bytes (`memlimit`).
    public let memoryLimit: Int
    /// A hash of a random password made with the same parameters: verified when a login names an
    /// unknown user, so that the answer takes as long as for a known one.
    public let dummyHash: String
    /// Bounds the argon2id jobs queued or running at once: past it a hash or verify is refused
    /// at once (429, code 100), so a login flood cannot fill the blocking pool's queue.
    public let pendingJobs: AdmissionLimit

    /// libsodium's interactive limits (2 passes, 64 MiB).
    public static let interactiveOperations = Int(crypto_pwhash_opslimit_interactive())
    public static let interactiveMemory = Int(crypto_pwhash_memlimit_interactive())

    /// Parameters clamped to libsodium's minimums. Computes the dummy hash (blocking, once).
    public init(operationsLimit: Int = PasswordHasher.interactiveOperations, memoryLimit: Int = PasswordHasher.interactiveMemory,
                maxPendingJobs: Int = 64) {
        Sodium.ensureInitialised()
        pendingJobs = AdmissionLimit(maxConcurrent: maxPendingJobs)
        self.operationsLimit = max(operationsLimit, Int(crypto_pwhash_argon2id_opslimit_min()))
        self.memoryLimit = max(memoryLimit, Int(crypto_pwhash_argon2id_memlimit_min()))
        let random = RandomID.hex(Sodium.randomBytes(16))
        dummyHash = (try? Self.hash(random, operations: self.operationsLimit, memory: self.memoryLimit)) ?? ""
    }

    /// Hashes `password` on the calling thread (blocking).
    public func hashBlocking(_ password: String) throws(ParseError) -> String {
        try Self.hash(password, operations: operationsLimit, memory: memoryLimit)
    }

    /// Whether `password` matches `hash`, on the calling thread (blocking). False for malformed hashes.
    public func verifyBlocking(_ password: String, hash: String) -> Bool {
        guard password.utf8.count <= Self.maxPasswordBytes, !hash.isEmpty else { return false }
        var hashBytes = Array(hash.utf8CString)
        guard hashBytes.count <= Int(crypto_pwhash_STRBYTES) else { return false }
        hashBytes += [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES) - hashBytes.count)
        let count = password.utf8.count
        let bytes = Array(password.utf8CString)
        return bytes.withUnsafeBufferPointer { pw in
            crypto_pwhash_str_verify(hashBytes, pw.baseAddress!, UInt64(count)) == 0
        }
    }

    /// Hashes on `pool`.
    public func hash(_ password: String, on pool: BlockingPool) async throws(ParseError) -> String {
        guard password.utf8.count <= Self.maxPasswordBytes else {
            throw .passwordMissing("password must be at most \(Self.maxPasswordBytes) bytes")
        }
        guard pendingJobs.tryEnter() else { throw Self.busy }
        defer { pendingJobs.leave() }
        let hasher = self
        let result: Result<String, ParseError>
        do {
            result = try await pool.run { () -> Result<String, ParseError> in
                do throws(ParseError) { return .success(try hasher.hashBlocking(password)) } catch { return .failure(error) }
            }
        } catch {
            throw .internalError("password hashing pool: \(error)")
        }
        return try result.get()
    }

    /// Verifies on `pool`; a nil `hash` (unknown user, no password set) checks the dummy hash and
    /// returns false, taking the same time.
    public func verify(_ password: String, hash: String?, on pool: BlockingPool) async throws(ParseError) -> Bool {
        guard pendingJobs.tryEnter() else { throw Self.busy }
        defer { pendingJobs.leave() }
        let hasher = self
        do {
            return try await pool.run {
                let ok = hasher.verifyBlocking(password, hash: hash ?? hasher.dummyHash)
                return ok && hash != nil
            }
        } catch {
            throw .internalError("password hashing pool: \(error)")
        }
    }

    static func hash(_ password: String, operations: Int, memory: Int) throws(ParseError) -> String {
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        let count = password.utf8.count
        let bytes = Array(password.utf8CString)
        let rc = bytes.withUnsafeBufferPointer { pw in
            crypto_pwhash_str_alg(&out, pw.baseAddress!, UInt64(count), UInt64(operations), Int(memory), crypto_pwhash_ALG_ARGON2ID13)
        }
        guard rc == 0 else { throw .internalError("crypto_pwhash_str failed (out of memory?)") }
        let length = out.firstIndex(of: 0) ?? out.count
        return String(decoding: out[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
