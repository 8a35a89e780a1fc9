/// The outcome of looking a request up in a `RouteTable`.
public enum RouteMatch: Sendable {
    case found(Route, PathParameters)
    /// The path exists for other methods only; `allowed` is for the `Allow` header.
    case methodNotAllowed(allowed: [HTTPMethod])
    case notFound
}

/// An immutable segment trie of routes, shared by every event loop.
///
/// Lookup walks the raw path bytes without splitting them into strings; a segment is decoded only
/// if it has a `%`, and parameter values become strings only for the route that wins. `HEAD` falls
/// back to the `GET` route.
public struct RouteTable: Sendable {
    struct Node: Sendable {
        var literals: [(segment: [UInt8], child: Int)] = []
        var parameter: Int?
        var wildcard: Int?
        var routes: [Route] = []
    }

    private var nodes: [Node] = [Node()]
    /// Every route, in registration order.
    public let routes: [Route]

    init(routes: [Route]) {
        self.routes = routes
        for route in routes {
            var node = 0
            for segment in RoutePattern.segments(of: route.pattern) {
                node = child(of: node, for: segment)
            }
            nodes[node].routes.append(route)
        }
    }

    private mutating func child(of node: Int, for segment: RoutePattern.Segment) -> Int {
        switch segment {
        case .literal(let bytes):
            if let existing = nodes[node].literals.first(where: { $0.segment == bytes }) { return existing.child }
            nodes.append(Node())
            nodes[node].literals.append((bytes, nodes.count - 1))
        case .parameter:
            if let existing = nodes[node].parameter { return existing }
            nodes.append(Node())
            nodes[node].parameter = nodes.count - 1
        case .wildcard:
            if let existing = nodes[node].wildcard { return existing }
            nodes.append(Node())
            nodes[node].wildcard = nodes.count - 1
        }
        return nodes.count - 1
    }

    /// Finds the route for a parsed request.
    public func match(_ head: HTTPRequestHead) -> RouteMatch {
        head.withRawPath { match(head.method, rawPath: $0) }
    }

    /// Finds the route for a method and a raw (percent-encoded) path.
    public func match(_ method: HTTPMethod, path: String) -> RouteMatch {
        var path = path
        return path.withUTF8 { match(method, rawPath: $0) }
    }

    private struct Search {
        var captures: [Range<Int>] = []
        var found: (Route, [Range<Int>])?
        var allowed: [HTTPMethod] = []
    }

    func match(_ method: HTTPMethod, rawPath: UnsafeBufferPointer<UInt8>) -> RouteMatch {
        var search = Search()
        if self.search(0, rawPath, 0, method, &search), let (route, captures) = search.found {
            var parameters = PathParameters()
            for (name, range) in zip(route.parameterNames, captures) {
                let raw = UnsafeBufferPointer(rebasing: rawPath[range])
                parameters.append(name, PercentDecoding.decodePath(raw) ?? String(decoding: raw, as: UTF8.self))
            }
            return .found(route, parameters)
        }
        if search.allowed.isEmpty { return .notFound }
        return .methodNotAllowed(allowed: search.allowed)
    }

    private func search(_ node: Int, _ path: UnsafeBufferPointer<UInt8>, _ position: Int, _ method: HTTPMethod, _ search: inout Search) -> Bool {
        var start = position
        while start < path.count, path[start] == .slash { start += 1 }
        if start == path.count {
            if consider(nodes[node].routes, method, &search) { return true }
            if let wildcard = nodes[node].wildcard {
                search.captures.append(start..<start)
                if consider(nodes[wildcard].routes, method, &search) { return true }
                search.captures.removeLast()
            }
            return false
        }
        var end = start
        while end < path.count, path[end] != .slash { end += 1 }
        let segment = UnsafeBufferPointer(rebasing: path[start..<end])
        if !nodes[node].literals.isEmpty {
            let decoded = segment.contains(.percent) ? PercentDecoding.decodeSegment(segment) : nil
            for literal in nodes[node].literals {
                let equal = decoded.map { $0 == literal.segment } ?? literal.segment.elementsEqual(segment)
                if equal {
                    if self.search(literal.child, path, end, method, &search) { return true }
                    break
                }
            }
        }
        if let parameter = nodes[node].parameter {
            search.captures.append(start..<end)
            if self.search(parameter, path, end, method, &search) { return true }
            search.captures.removeLast()
        }
        if let wildcard = nodes[node].wildcard {
            search.captures.append(start..<path.count)
            if consider(nodes[wildcard].routes, method, &search) { return true }
            search.captures.removeLast()
        }
        return false
    }

    /// Picks the route for `method` at a node whose pattern matched the whole path; otherwise
    /// remembers the node's methods for a 405.
    private func consider(_ routes: [Route], _ method: HTTPMethod, _ search: inout Search) -> Bool {
        guard !routes.isEmpty else { return false }
        if let route = routes.first(where: { $0.method == method })
            ?? (method == .head ? routes.first(where: { $0.method == .get }) : nil) {
            search.found = (route, search.captures)
            return true
        }
        for route in routes where !search.allowed.contains(route.method) {
            search.allowed.append(route.method)
            if route.method == .get, !routes.contains(where: { $0.method == .head }), !search.allowed.contains(.head) {
                search.allowed.append(.head)
            }
        }
        return false
    }
}
