import ParleyHTTP

/// How push jobs are built and sent (`--push-*` options).
public struct PushConfiguration: Sendable {
    /// The gorush-compatible gateway (`POST {gateway}/api/push`); nil = no gateway: jobs are
    /// logged and marked `skipped`.
    public var gatewayURL: HTTPClientURL?
    /// The app's bundle id: the APNs topic of alerts; VoIP pushes use `<bundleID>.voip`. Empty =
    /// no topic sent (gorush then uses its own `ios.topic`... or APNs the certificate's).
    public var bundleID: String
    /// The `_User` field shown as the title of a message push (`username` or a custom field;
    /// `username` when the field is missing).
    public var titleField: String
    /// Show the message text in the push; off = "New message".
    public var messagePreview: Bool
    /// Characters of message text in a preview.
    public var previewLength: Int
    /// A message push waits this long after the first message, so a burst becomes one push.
    public var collapseWindow: Duration
    /// Jobs claimed and sent per gateway request (gorush's `core.max_notification` is 100).
    public var batchSize: Int
    /// Batches in flight per node.
    public var concurrency: Int
    /// Attempts before a job is dead.
    public var maxAttempts: Int
    /// Delay before the second attempt; doubles per attempt (with jitter) up to `backoffMax`.
    public var backoffBase: Duration
    public var backoffMax: Duration
    /// Deadline of one gateway request.
    public var requestTimeout: Duration
    /// PEM CA bundle an `https` gateway is verified against; nil = the system store.
    public var tlsCAFile: String?
    /// How often a node looks for due jobs when nothing woke it.
    public var pollInterval: Duration
    /// Finished jobs (sent, skipped, canceled, expired, rejected) are deleted after this; dead
    /// jobs stay until retried.
    public var retention: Duration
    /// A call's headers go into the VoIP payload only up to this many bytes of JSON.
    public var maxCallHeaderBytes: Int
    /// Gateway errors (substrings, case-insensitive) that mean the token is invalid: the token is
    /// removed from its installation and the job is `rejected`.
    public var invalidTokenErrors: [String]

    public init(gatewayURL: HTTPClientURL? = nil, bundleID: String = "", titleField: String = "username", messagePreview: Bool = true,
                previewLength: Int = 200, collapseWindow: Duration = .seconds(1), batchSize: Int = 100, concurrency: Int = 4,
                maxAttempts: Int = 8, backoffBase: Duration = .seconds(2), backoffMax: Duration = .seconds(600),
                requestTimeout: Duration = .seconds(10), pollInterval: Duration = .seconds(1), retention: Duration = .seconds(7 * 86_400),
                maxCallHeaderBytes: Int = 1024, invalidTokenErrors: [String] = PushConfiguration.defaultInvalidTokenErrors) {
        self.gatewayURL = gatewayURL
        self.bundleID = bundleID
        self.titleField = titleField
        self.messagePreview = messagePreview
        self.previewLength = previewLength
        self.collapseWindow = collapseWindow
        self.batchSize = max(1, batchSize)
        self.concurrency = max(1, concurrency)
        self.maxAttempts = max(1, maxAttempts)
        self.backoffBase = backoffBase
        self.backoffMax = backoffMax
        self.requestTimeout = requestTimeout
        self.pollInterval = pollInterval
        self.retention = retention
        self.maxCallHeaderBytes = maxCallHeaderBytes
        self.invalidTokenErrors = invalidTokenErrors
    }

    /// APNs reasons and FCM errors for a token that will never work again.
    public static let defaultInvalidTokenErrors = [
        "BadDeviceToken", "Unregistered", "DeviceTokenNotForTopic", "ExpiredToken",
        "NotRegistered", "InvalidRegistration", "registration-token-not-registered", "invalid-registration-token",
        "Requested entity was not found", "not a valid FCM registration token",
    ]

    /// How long a claimed job belongs to its node: a node that stops mid-send loses its jobs
    /// to the others after this (longer than any request, so a slow one is not sent twice).
    public var lease: Duration { requestTimeout * 2 + .seconds(5) }
}
