import ParleyNet
import Synchronization

/// The client TLS context of a transport, made on first use (it reads the CA file).
final class ClientTLSContext: Sendable {
    /// PEM CA bundle servers are verified against; nil = the system store.
    let caFile: String?
    private let made: Mutex<Result<TLSContext, TLSError>?> = Mutex(nil)

    init(caFile: String?) {
        self.caFile = caFile
    }

    func get() throws(TLSError) -> TLSContext {
        let result = made.withLock { cached in
            if let cached { return cached }
            let result: Result<TLSContext, TLSError>
            do throws(TLSError) {
                result = .success(try TLSContext.client(caFile: caFile))
            } catch {
                result = .failure(error)
            }
            cached = result
            return result
        }
        return try result.get()
    }
}
