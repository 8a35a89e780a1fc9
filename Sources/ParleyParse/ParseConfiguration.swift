import ParleyAccounts
import ParleyNet

/// Settings of the Parse-compatible REST API.
public struct ParseConfiguration: Sendable {
    /// The application id clients must send (`X-Parse-Application-Id` or `_ApplicationId`).
    public var applicationID: String
    /// The master key; nil disables master-key access.
    public var masterKey: String?
    /// The REST API key; when set, non-master requests must send it (`X-Parse-REST-API-Key`).
    public var restAPIKey: String?
    /// Where the API is mounted (`/parse`).
    public var mountPath: String
    /// Most sub-requests in one `POST /batch`.
    public var maxBatchRequests: Int
    /// Largest answer sent whole (`--max-answer-size`): a single object, a batch's answers
    /// together, a find rewritten by `afterFind`; past it 116. Finds streamed page by page are
    /// not bounded by it.
    public var maxAnswerBytes: Int
    /// Largest object a write may send (`--max-object-size`): its JSON body, past it 116.
    public var maxObjectBytes: Int
    /// Whole answers longer than this go out in slices (half the connection's output bound,
    /// `--max-outbound-bytes`, which closes a connection queueing more); shorter ones are queued
    /// at once, which lets the kernel take most of them and frees them soonest.
    public var sliceAnswersAbove: Int
    /// Where the server is reached from outside, and which peers may say so (`Location` headers).
    public var serverURL: ParseServerURL
    /// The bounds of `$regex` finds (timeout, how many at once).
    public var regexLimit: RegexStatementLimit
    /// Failed logins per account and per client address (`--login-*`).
    public var loginThrottle: LoginThrottle
    /// Whether a client (not the master key) may create a class by writing to it or reading
    /// it (`--allow-client-class-creation`); off by default, as Parse Server 7 and later.
    public var allowClientClassCreation: Bool
    /// The pages mailed links lead to (verification, password reset).
    public var pages: AccountPages
    /// The Parse push API (`POST /push`); nil: it answers 115 `Missing push configuration`.
    public var push: ParsePushSettings?

    public init(applicationID: String, masterKey: String? = nil, restAPIKey: String? = nil, mountPath: String = "/parse",
                maxBatchRequests: Int = 50, maxAnswerBytes: Int = 64 << 20, maxObjectBytes: Int = 16 << 20,
                sliceAnswersAbove: Int = 2 << 20, serverURL: ParseServerURL = ParseServerURL(),
                regexLimit: RegexStatementLimit = RegexStatementLimit(), loginThrottle: LoginThrottle = LoginThrottle(),
                pages: AccountPages = AccountPages(), push: ParsePushSettings? = nil, allowClientClassCreation: Bool = false) {
        self.applicationID = applicationID
        self.masterKey = masterKey.flatMap { $0.isEmpty ? nil : $0 }
        self.restAPIKey = restAPIKey.flatMap { $0.isEmpty ? nil : $0 }
        var path = mountPath
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.mountPath = path.isEmpty ? "/" : path
        self.maxBatchRequests = max(1, maxBatchRequests)
        self.maxAnswerBytes = max(1024, maxAnswerBytes)
        self.maxObjectBytes = max(1024, maxObjectBytes)
        self.sliceAnswersAbove = max(ResponseSlices.sliceBytes, sliceAnswersAbove)
        self.serverURL = serverURL
        self.regexLimit = regexLimit
        self.loginThrottle = loginThrottle
        self.allowClientClassCreation = allowClientClassCreation
        self.pages = pages
        self.push = push
    }
}

/// How `POST /push` queues its jobs.
public struct ParsePushSettings: Sendable {
    /// Installations read and queued per transaction.
    public var pageSize: Int
    /// How long a node may page one push before another node takes it over.
    public var lease: Duration
    /// Called after each page is committed (wakes the push worker).
    public var queued: @Sendable () -> Void
    /// Pushes being paged into jobs on this node at once; a push over the cap waits, recorded,
    /// for a free slot on any node.
    public var pagers: AdmissionLimit

    public init(pageSize: Int = 1000, lease: Duration = .seconds(30), maxPaging: Int = 4, queued: @escaping @Sendable () -> Void = {}) {
        self.pageSize = max(1, min(pageSize, 1000))
        self.lease = lease
        self.queued = queued
        pagers = AdmissionLimit(maxConcurrent: maxPaging)
    }
}
