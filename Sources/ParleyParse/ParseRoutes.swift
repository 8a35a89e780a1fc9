import ParleyHTTP

/// The endpoints of the Parse API below the mount path, matched by method and path segments.
/// Used for top-level requests and for `POST /batch` sub-requests alike.
struct ParseRoutes: Sendable {
    typealias Handler = @Sendable (ParseAPI, ParseRequest) async throws -> ParseResponse

    struct Route: Sendable {
        let method: HTTPMethod
        /// Literal segments, or `:name` for a parameter.
        let segments: [String]
        let handler: Handler
    }

    private(set) var routes: [Route] = []
    /// Routes without parameters by method and exact path: one hash lookup for the hot paths.
    private var literals: [HTTPMethod: [String: Handler]] = [:]

    mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
        let segments = pattern.split(separator: "/").map(String.init)
        routes.append(Route(method: method, segments: segments, handler: handler))
        if !segments.contains(where: { $0.hasPrefix(":") }) {
            literals[method, default: [:]]["/" + segments.joined(separator: "/")] = handler
        }
    }

    /// The handler and parameters for a request, or nil.
    func match(_ method: HTTPMethod, path: String) -> (Handler, [String: String])? {
        let lookup = method == .head ? HTTPMethod.get : method
        if let handler = literals[lookup]?[path] { return (handler, [:]) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        for route in routes where route.method == lookup && route.segments.count == parts.count {
            var parameters: [String: String] = [:]
            var matched = true
            for (segment, part) in zip(route.segments, parts) {
                if segment.hasPrefix(":") {
                    parameters[String(segment.dropFirst())] = part
                } else if segment != part {
                    matched = false
                    break
                }
            }
            if matched { return (route.handler, parameters) }
        }
        return nil
    }
}
