import ParleyAccounts
import ParleyHTTP
import ParleyJSON
import ParleyPostgres

extension ParseAPI {
    /// One parsed sub-request of a batch: its endpoint found in the router's table.
    private struct SubRequest: Sendable {
        let method: HTTPMethod
        let path: String
        /// Nil when no endpoint has this method and path (that sub-request fails with 107).
        let endpoint: ParseEndpoint?
        /// False for a path no HTTP request could carry (that sub-request fails with 400 107).
        let isWellFormed: Bool
        let parameters: PathParameters
        let query: [(name: String, value: String)]
        let body: JSONObject?
    }

    /// `POST /batch`: runs the sub-requests in order as the batch's viewer (a sub-request's own
    /// credentials, if its body has any, are ignored, as Parse Server ignores them) and answers
    /// `[{"success":…}|{"error":{code,error}}]` in the same order. With `"transaction": true`
    /// they run in one PostgreSQL transaction: the first failure rolls everything back and the
    /// whole batch answers with that failure.
    func batch(_ request: ParseRequest) async throws -> ParseResponse {
        guard !request.isBatched else { throw ParseError.invalidJSON("nested batch requests are not allowed") }
        guard let items = request.body?["requests"]?.array else { throw ParseError.invalidJSON("requests must be an array") }
        guard items.count <= configuration.maxBatchRequests else {
            throw ParseError.invalidJSON("Batch request contains \(items.count) sub-requests, which exceeds the limit of \(configuration.maxBatchRequests).")
        }
        var subs: [SubRequest] = []
        for item in items {
            guard case .object(let object) = item, let rawPath = object["path"]?.string else {
                throw ParseError.invalidJSON("batch request path must be a string")
            }
            let methodName = (object["method"]?.string ?? "GET").uppercased()
            guard let method = HTTPMethod(rawValue: methodName), [.get, .post, .put, .delete].contains(method) else {
                throw ParseError.invalidJSON("unsupported batch method \(methodName)")
            }
            let target = try routableTarget(rawPath)
            // A path no HTTP request could carry (a NUL, a space) fails that sub-request alone,
            // as one for an unknown route does.
            let head = try? HTTPRequestHead(method: method, target: target)
            if method == .post && head?.path == RoutePath.join(configuration.mountPath, "/batch") {
                throw ParseError.invalidJSON("nested batch requests are not allowed")
            }
            var body: JSONObject?
            if let value = object["body"], !value.isNull {
                guard case .object(var bodyObject) = value else { throw ParseError.invalidJSON("batch request body must be an object") }
                ParseEnvelope.removeEnvelope(from: &bodyObject)
                body = bodyObject
            }
            let (endpoint, parameters) = resolve(head)
            subs.append(SubRequest(method: method, path: head?.path ?? target, endpoint: endpoint, isWellFormed: head != nil, parameters: parameters,
                                   query: head?.queryParameters ?? [], body: body))
        }

        if request.body?["transaction"]?.bool == true {
            let subs = subs
            do {
                let limit = configuration.maxAnswerBytes
                let results = try await accounts.transaction { tx in
                    var results: [[UInt8]] = []
                    var used = 2
                    for sub in subs {
                        let answer = try await self.run(sub, of: request, db: tx).collected(upTo: max(0, limit - used))
                        results.append(Self.success(answer))
                        used += results[results.count - 1].count + 1
                    }
                    return results
                }
                return .ok(Self.array(results))
            } catch let error as PostgresError {
                throw ParseError.internalError("batch transaction: \(error)")
            }
        }
        // The answers together stay within the answer limit: one that does not fit in what is
        // left answers 116 in its place (its write, if any, is done), so later ones may still fit.
        var results: [[UInt8]] = []
        var used = 2
        for sub in subs {
            defer { used += results[results.count - 1].count + 1 }
            do {
                let reserve = 256 * (subs.count - results.count)
                let answer = try await run(sub, of: request, db: request.db).collected(upTo: max(0, configuration.maxAnswerBytes - used - reserve))
                results.append(Self.success(answer))
            } catch {
                let failure = ParseFailure(error)
                if case .parse(.internalError(let detail)) = failure {
                    logger.error("batch sub-request failed", [("error", detail), ("path", sub.path)])
                }
                results.append(Array(JSONValue.object(["error": ParseErrorMapping.batchError(for: failure)]).serialized().utf8))
            }
        }
        return .ok(Self.array(results))
    }

    /// Runs one sub-request through `run`, as the batch's viewer.
    private func run(_ sub: SubRequest, of batch: ParseRequest, db: any SQLExecutor) async throws -> ParseResponse {
        guard sub.isWellFormed else { throw ParseError.invalidJSON("cannot route batch path \(sub.path)") }
        guard let endpoint = sub.endpoint else { throw ParseFailure.noRoute(method: sub.method.rawValue, path: sub.path) }
        let request = ParseRequest(
            method: sub.method, parameters: sub.parameters, query: sub.query, body: sub.body,
            bodyIsQuery: sub.method == .get && sub.body != nil, auth: batch.auth, sessionToken: batch.sessionToken,
            baseURL: batch.baseURL, db: db, clientAddress: batch.clientAddress, headers: batch.headers, isBatched: true)
        return try await run(endpoint, request)
    }

    /// `{"success":<body>}`.
    private static func success(_ response: ParseResponse) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(response.body.count + 12)
        bytes.append(#"{"success":"#)
        bytes.append(contentsOf: response.body)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// `[a,b,…]` of serialized elements.
    private static func array(_ elements: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        bytes.reserveCapacity(elements.reduce(2) { $0 + $1.count + 1 })
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: element)
        }
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }

    /// The request target (path under the router's root, with its query) of a batch path: it
    /// must start with the mount path (Parse Server's rule), with the public URL's path and the
    /// mount path (the path a client of `--public-url` sees, as Parse Server's
    /// `publicServerURL`), or with Parse.com's `/1/`.
    private func routableTarget(_ path: String) throws(ParseError) -> String {
        let mount = configuration.mountPath
        let publicMount = RoutePath.join(configuration.serverURL.publicPath, mount)
        if publicMount != mount, let rest = RoutePath.below(publicMount, path) { return RoutePath.join(mount, rest) }
        if let rest = RoutePath.below(mount, path) { return RoutePath.join(mount, rest) }
        if path.hasPrefix("/1/") { return RoutePath.join(mount, String(path.dropFirst(2))) }
        throw ParseError.invalidJSON("cannot route batch path \(path)")
    }
}

/// Joining and splitting `/`-separated paths (mount paths, batch paths).
enum RoutePath {
    /// `prefix` and `path` with one `/` between them (`/` and `/x` → `/x`).
    static func join(_ prefix: String, _ path: String) -> String {
        let head = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
        if path.isEmpty { return head.isEmpty ? "/" : head }
        return head + (path.hasPrefix("/") || path.hasPrefix("?") ? path : "/" + path)
    }

    /// What follows `prefix` in `path` when `path` is `prefix` or continues it at a `/` or `?`.
    static func below(_ prefix: String, _ path: String) -> String? {
        if prefix == "/" || prefix.isEmpty { return path.hasPrefix("/") ? path : nil }
        guard path.hasPrefix(prefix) else { return nil }
        let rest = path.dropFirst(prefix.count)
        guard rest.isEmpty || rest.hasPrefix("/") || rest.hasPrefix("?") else { return nil }
        return String(rest)
    }
}
