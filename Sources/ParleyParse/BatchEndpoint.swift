import ParleyAccounts
import ParleyHTTP
import ParleyJSON
import ParleyPostgres

extension ParseAPI {
    /// One parsed sub-request of a batch.
    private struct SubRequest: Sendable {
        let method: HTTPMethod
        let path: String
        let body: JSONObject?
    }

    /// `POST /batch`: runs the sub-requests in order with the caller's auth and answers
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
            let path = try routablePath(rawPath)
            if method == .post && path == "/batch" { throw ParseError.invalidJSON("nested batch requests are not allowed") }
            var body: JSONObject?
            if let value = object["body"], !value.isNull {
                guard case .object(let bodyObject) = value else { throw ParseError.invalidJSON("batch request body must be an object") }
                body = bodyObject
            }
            subs.append(SubRequest(method: method, path: path, body: body))
        }

        if request.body?["transaction"]?.bool == true {
            let subs = subs
            do {
                let results = try await accounts.transaction { tx in
                    var results: [JSONValue] = []
                    for sub in subs {
                        let response = try await self.dispatch(self.subRequest(sub, of: request, db: tx))
                        results.append(["success": response.body])
                    }
                    return results
                }
                return ParseResponse(body: .array(results))
            } catch let error as PostgresError {
                throw ParseError.internalError("batch transaction: \(error)")
            }
        }
        var results: [JSONValue] = []
        for sub in subs {
            do {
                let response = try await dispatch(subRequest(sub, of: request, db: request.db))
                results.append(["success": response.body])
            } catch {
                let failure = Self.failure(error)
                if case .parse(.internalError(let detail)) = failure {
                    logger.error("batch sub-request failed", [("error", detail), ("path", sub.path)])
                }
                results.append(["error": ParseErrorMapping.batchError(for: failure)])
            }
        }
        return ParseResponse(body: .array(results))
    }

    private func subRequest(_ sub: SubRequest, of request: ParseRequest, db: any SQLExecutor) -> ParseRequest {
        var query: [(name: String, value: String)] = []
        var path = sub.path
        if let mark = path.firstIndex(of: "?") {
            let text = path[path.index(after: mark)...]
            path = String(path[..<mark])
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = Self.percentDecode(String(parts[0])), value = parts.count > 1 ? Self.percentDecode(String(parts[1])) : ""
                query.append((name, value))
            }
        }
        return ParseRequest(method: sub.method, path: path, query: query, body: sub.body, bodyIsQuery: sub.method == .get && sub.body != nil,
                            auth: request.auth, sessionToken: request.sessionToken, host: request.host, scheme: request.scheme,
                            mountPath: request.mountPath, db: db, isBatched: true)
    }

    /// The path below the mount for a batch path: it must start with the mount path (Parse
    /// Server's rule) or with Parse.com's `/1/`.
    private func routablePath(_ path: String) throws(ParseError) -> String {
        let mount = configuration.mountPath
        if mount != "/", path == mount || path.hasPrefix(mount + "/") { return subpath(path) }
        if path.hasPrefix("/1/") { return String(path.dropFirst(2)) }
        if mount == "/", path.hasPrefix("/") { return path }
        throw ParseError.invalidJSON("cannot route batch path \(path)")
    }

    static func percentDecode(_ text: String) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
