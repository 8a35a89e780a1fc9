import ParleyHTTP
import ParleyLog
import ParleyNet
import Synchronization

/// A provider's signing keys, fetched from its JWKS URL and kept for the time its answer
/// allows (`Cache-Control: max-age`, clamped). A token signed by a key the cache does not know
/// makes it fetch again (a provider rotated its keys), at most once per `refetchInterval`, so
/// tokens with made-up key ids cannot turn Parley into a flood against the provider. Concurrent
/// lookups share one fetch. When a fetch fails, the keys already known keep working.
public final class JWKSCache: Sendable {
    /// Where the keys come from and how long they are kept.
    public struct Configuration: Sendable {
        public var url: HTTPClientURL
        /// Kept this long when the answer has no `max-age`.
        public var defaultTTL: Duration
        /// Bounds on the time an answer's `max-age` keeps the keys.
        public var minimumTTL: Duration
        public var maximumTTL: Duration
        /// Least time between two fetches (unknown key ids, failures).
        public var refetchInterval: Duration
        /// Deadline of one fetch.
        public var timeout: Duration

        public init(url: HTTPClientURL, defaultTTL: Duration = .seconds(3600), minimumTTL: Duration = .seconds(60),
                    maximumTTL: Duration = .seconds(86_400), refetchInterval: Duration = .seconds(30), timeout: Duration = .seconds(10)) {
            self.url = url
            self.defaultTTL = defaultTTL
            self.minimumTTL = minimumTTL
            self.maximumTTL = max(minimumTTL, maximumTTL)
            self.refetchInterval = refetchInterval
            self.timeout = timeout
        }
    }

    public let provider: String
    public let configuration: Configuration
    private let client: HTTPClient
    private let logger: Logger
    private let state = Mutex(State())
    private let fetches = Atomic<Int>(0)

    private struct State {
        var keys = JSONWebKeySet(keys: [])
        /// Monotonic nanoseconds after which the keys are stale.
        var expires: UInt64 = 0
        /// When the last fetch started (nil: never).
        var lastFetch: UInt64?
        /// Why the last fetch failed (nil: it did not).
        var lastFailure: String?
        /// Lookups waiting for the fetch in flight (nil: none in flight).
        var waiters: [CheckedContinuation<Void, Never>]?
    }

    private enum Step {
        case found([JSONWebKey])
        case wait
        case fetch
    }

    public init(provider: String, configuration: Configuration, client: HTTPClient, logger: Logger = Logger(label: "identity")) {
        self.provider = provider
        self.configuration = configuration
        self.client = client
        self.logger = logger
    }

    /// Fetches started so far (tests, metrics).
    public var fetchCount: Int { fetches.load(ordering: .relaxed) }

    /// The keys that may verify a token with `keyID` and `algorithm`, fetching when the cache is
    /// stale or does not know the key (within the refetch bound).
    public func keys(keyID: String?, algorithm: SignatureAlgorithm) async throws(IdentityError) -> [JSONWebKey] {
        for _ in 0..<4 {
            switch nextStep(keyID: keyID, algorithm: algorithm) {
            case .found(let keys):
                if keys.isEmpty { try noKey(keyID) }
                return keys
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let fetching = state.withLock { state -> Bool in
                        guard state.waiters != nil else { return false }
                        state.waiters?.append(continuation)
                        return true
                    }
                    if !fetching { continuation.resume() }
                }
            case .fetch:
                await fetch()
            }
        }
        try noKey(keyID)
    }

    private func nextStep(keyID: String?, algorithm: SignatureAlgorithm) -> Step {
        let now = EventLoop.monotonicNanoseconds()
        return state.withLock { state -> Step in
            let candidates = state.keys.candidates(keyID: keyID, algorithm: algorithm)
            if now < state.expires && !candidates.isEmpty { return .found(candidates) }
            if state.waiters != nil { return .wait }
            if let last = state.lastFetch, now - last < configuration.refetchInterval.nonNegativeNanoseconds {
                return .found(candidates)
            }
            state.waiters = []
            state.lastFetch = now
            return .fetch
        }
    }

    private func noKey(_ keyID: String?) throws(IdentityError) -> Never {
        let failure = state.withLock { $0.keys.keys.isEmpty ? $0.lastFailure : nil }
        if let failure { throw .providerUnavailable(provider: provider, detail: failure) }
        throw .invalidToken("Unable to find matching key for Key ID: \(keyID ?? "(none)")")
    }

    /// Fetches the document, stores the keys (or the failure), wakes the waiters.
    private func fetch() async {
        fetches.add(1, ordering: .relaxed)
        let result = await download()
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            switch result {
            case .success(let (keys, ttl)):
                state.keys = keys
                state.expires = EventLoop.monotonicNanoseconds() + ttl.nonNegativeNanoseconds
                state.lastFailure = nil
            case .failure(let failure):
                state.lastFailure = failure.reason
            }
            let waiting = state.waiters ?? []
            state.waiters = nil
            return waiting
        }
        switch result {
        case .success(let (keys, ttl)):
            logger.info("fetched signing keys", [("provider", provider), ("keys", "\(keys.keys.count)"), ("skipped", "\(keys.skipped)"),
                                                 ("ttl", "\(ttl.components.seconds)s")])
        case .failure(let failure):
            logger.warning("fetching signing keys failed", [("provider", provider), ("url", configuration.url.description), ("error", failure.reason)])
        }
        for waiter in waiters { waiter.resume() }
    }

    private struct FetchFailure: Error {
        let reason: String
    }

    private func download() async -> Result<(JSONWebKeySet, Duration), FetchFailure> {
        let response: HTTPClientResponse
        do {
            response = try await client.execute(HTTPClientRequest(method: .get, url: configuration.url, headers: ["Accept": "application/json"]),
                                                timeout: configuration.timeout)
        } catch {
            return .failure(FetchFailure(reason: error.description))
        }
        guard response.status.code == 200 else { return .failure(FetchFailure(reason: "status \(response.status.code)")) }
        guard let keys = JSONWebKeySet(document: response.body) else { return .failure(FetchFailure(reason: "the answer is not a JWKS document")) }
        return .success((keys, ttl(cacheControl: response.headers["cache-control"])))
    }

    /// The time an answer keeps the keys: its `max-age` within the bounds, else the default.
    func ttl(cacheControl: String?) -> Duration {
        guard let maxAge = cacheControl.flatMap(Self.maxAge) else { return configuration.defaultTTL }
        return min(configuration.maximumTTL, max(configuration.minimumTTL, .seconds(maxAge)))
    }

    /// The `max-age` directive of a Cache-Control value, in seconds.
    static func maxAge(_ value: String) -> Int64? {
        for directive in value.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingWhitespace().lowercased() == "max-age" else { continue }
            var number = parts[1].trimmingWhitespace()
            if number.hasPrefix("\""), number.hasSuffix("\""), number.count >= 2 { number = String(number.dropFirst().dropLast()) }
            guard number.count <= 12, let seconds = Int64(number), seconds >= 0 else { return nil }
            return seconds
        }
        return nil
    }
}

extension Substring {
    func trimmingWhitespace() -> String {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }
}
