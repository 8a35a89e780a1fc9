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
/// back to the `GET` route. A request whose raw path and method are exactly those of an
/// all-literal route (`GET /health`) is found by a byte comparison before the walk, which would
/// find that same route first.
///
/// A class, so that handing the table to a lookup passes one reference, not its arrays.
public final class RouteTable: Sendable {
    struct Node: Sendable {
        var literals: [(segment: [UInt8], child: Int)] = []
        var parameter: Int?
        var wildcard: Int?
        var routes: [Route] = []
    }

    /// An all-literal route's canonical path in `literalPaths`.
    private struct LiteralRoute {
        let start: Int
        let count: Int
        let method: HTTPMethod
        let route: Int
    }

    private let nodes: [Node]
    private let literalPaths: [UInt8]
    private let literalRoutes: [LiteralRoute]
    /// Every route, in registration order.
    public let routes: [Route]

    init(routes: [Route]) {
        self.routes = routes
        var nodes = [Node()]
        var literalPaths: [UInt8] = []
        var literalRoutes: [LiteralRoute] = []
        for (position, route) in routes.enumerated() {
            var node = 0
            var literal = true
            for segment in RoutePattern.segments(of: route.pattern) {
                if case .literal = segment {} else { literal = false }
                node = RouteTable.child(of: node, for: segment, in: &nodes)
            }
            nodes[node].routes.append(route)
            // A pattern with `%` is compared decoded by the walk, so it cannot be matched raw.
            if literal, !route.pattern.utf8.contains(.percent) {
                literalRoutes.append(LiteralRoute(start: literalPaths.count, count: route.pattern.utf8.count, method: route.method, route: position))
                literalPaths.append(contentsOf: route.pattern.utf8)
            }
        }
        self.nodes = nodes
        self.literalPaths = literalPaths
        self.literalRoutes = literalRoutes
    }

    /// The all-literal route whose canonical path is exactly `rawPath`, for `method`.
    private func literalRoute(_ method: HTTPMethod, _ rawPath: UnsafeBufferPointer<UInt8>) -> Route? {
        for entry in literalRoutes where entry.count == rawPath.count && entry.method == method {
            let equal = literalPaths.withUnsafeBufferPointer { paths in
                var index = 0
                while index < entry.count, paths[entry.start + index] == rawPath[index] { index += 1 }
                return index == entry.count
            }
            if equal { return routes[entry.route] }
        }
        return nil
    }

    private static func child(of node: Int, for segment: RoutePattern.Segment, in nodes: inout [Node]) -> Int {
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
        if let route = literalRoute(method, rawPath) { return .found(route, PathParameters()) }
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
