/// What one route of the Parse API runs once its request is authorized. Registered once, as its
/// route's payload (`Route.payload`), so that batch sub-requests and the `_method` form find it
/// in the router's table like any request.
struct ParseEndpoint: Sendable {
    typealias Handler = @Sendable (ParseAPI, ParseRequest) async throws -> ParseResponse

    let handler: Handler
    /// False for login, which ignores a session token (as Parse Server).
    var readsSession = true
    /// Only the master key may call it (403 otherwise, as Parse Server's `serverInfo`).
    var requiresMaster = false

    /// The object write it makes, for Cloud Code triggers (nil: none).
    var write: ParseWrite?
    /// The read it makes, for Cloud Code's beforeFind/afterFind (nil: none).
    var read: ParseRead?

    init(readsSession: Bool = true, requiresMaster: Bool = false, _ handler: @escaping Handler) {
        self.handler = handler
        self.readsSession = readsSession
        self.requiresMaster = requiresMaster
    }

    /// This endpoint, declared as reading objects of `className` (nil: the route's `:className`).
    func reading(_ operation: ParseRead.Operation, _ className: String? = nil) -> ParseEndpoint {
        var endpoint = self
        endpoint.read = ParseRead(operation: operation, className: className)
        return endpoint
    }

    /// This endpoint, declared as making `write`.
    func writing(_ operation: ParseWrite.Operation, _ className: String? = nil) -> ParseEndpoint {
        var endpoint = self
        endpoint.write = ParseWrite(operation: operation, className: className)
        return endpoint
    }
}

/// The object write an endpoint makes: what `ParseAPI.run` runs triggers around.
struct ParseWrite: Sendable {
    enum Operation: Sendable { case create, update, delete }
    let operation: Operation
    /// The class, or nil when the route's `:className` names it. An update or delete names the
    /// object with the route's `:id`.
    let className: String?
}

/// The object read an endpoint makes: a find, or a get of the route's `:id`.
struct ParseRead: Sendable {
    enum Operation: Sendable { case find, get }
    let operation: Operation
    let className: String?
}
