import ParleyAccounts
import ParleyCloud
import ParleyHTTP
import ParleyJSON

/// What a Parse endpoint answers: a status, the JSON body (serialized once, by `RowJSON` for
/// rows and `JSONSerializer` for everything else) and extra headers. A batch embeds the bodies of
/// its sub-requests as they are.
struct ParseResponse: Sendable {
    var status: HTTPStatus
    /// Serialized JSON (empty while `pages` produces the body).
    var body: [UInt8]
    var headers: [(String, String)]
    /// A find's body produced as it is sent (`FindPages`); nil: `body` is the whole body.
    var pages: FindPages?

    /// A response whose body is already JSON text.
    init(status: HTTPStatus = .ok, body: [UInt8], headers: [(String, String)] = []) {
        self.status = status
        self.body = body
        self.headers = headers
    }

    init(status: HTTPStatus = .ok, json: JSONValue, headers: [(String, String)] = []) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        json.serialize(into: &bytes)
        self.init(status: status, body: bytes, headers: headers)
    }

    /// A find's answer: its bytes, or its pages.
    init(answer: FindAnswer) {
        switch answer {
        case .bytes(let bytes): self.init(body: bytes)
        case .pages(let pages):
            self.init(body: [])
            self.pages = pages
        }
    }

    /// The response with its whole body in `body`: pages are read to their end, at most `limit`
    /// bytes (past it 116, `answerTooLarge`).
    func collected(upTo limit: Int) async throws(ParseError) -> ParseResponse {
        guard let pages else {
            guard body.count <= limit else { throw ParseError.answerTooLarge(limit: limit) }
            return self
        }
        var whole = self
        whole.pages = nil
        whole.body = try await FindAnswer.pages(pages).collect(upTo: limit)
        return whole
    }

    static func ok(_ object: JSONObject) -> ParseResponse { ParseResponse(json: .object(object)) }
    static func ok(_ bytes: [UInt8]) -> ParseResponse { ParseResponse(body: bytes) }
    static let empty = ParseResponse(body: Array("{}".utf8))
}

/// Everything a request can fail with before or inside an endpoint.
enum ParseFailure: Error, Sendable {
    /// A Parse error: `{"code":N,"error":"…"}`.
    case parse(ParseError)
    /// Missing or wrong application id or key: 403 `{"error":"unauthorized"}`, as Parse Server.
    case unauthorized
    /// An endpoint only the master key may use: 403 `{"error":"unauthorized: master key is required"}`.
    case masterKeyRequired
    /// No endpoint for this method and path.
    case noRoute(method: String, path: String)

    init(_ error: any Error) {
        switch error {
        case let failure as ParseFailure: self = failure
        case let error as ParseError: self = .parse(error)
        case let error as CloudError: self = .parse(ParseError(error))
        default: self = .parse(.internalError("\(error)"))
        }
    }
}

/// The single place where failures become HTTP responses.
enum ParseErrorMapping {
    /// Parse Server's statuses: 101 → 404, internal (1) → 500, every other code → 400; and
    /// 100 → 429, as Parse Server's `rateLimit` answers (a bounded resource is full).
    static func status(for error: ParseError) -> HTTPStatus {
        switch error.code {
        case 101: .notFound
        case 1: .internalServerError
        case 100: .tooManyRequests
        default: .badRequest
        }
    }

    static func response(for failure: ParseFailure) -> ParseResponse {
        switch failure {
        case .parse(let error):
            // An internal error answers `message`, not `error`, as Parse Server.
            if case .internalError = error { return ParseResponse(status: .internalServerError, json: ["code": 1, "message": "Internal server error."]) }
            return ParseResponse(status: status(for: error), json: ["code": .int(Int64(error.code)), "error": .string(error.message)])
        case .unauthorized:
            return ParseResponse(status: .forbidden, json: ["error": "unauthorized"])
        case .masterKeyRequired:
            return ParseResponse(status: .forbidden, json: ["error": "unauthorized: master key is required"])
        case .noRoute(let method, let path):
            return ParseResponse(status: .notFound, json: ["code": 107, "error": .string("cannot route \(method) \(path)")])
        }
    }

    /// The `{"code","error"}` of a failed batch sub-request.
    static func batchError(for failure: ParseFailure) -> JSONValue {
        switch failure {
        case .parse(let error):
            if case .internalError = error { return ["code": 1, "error": "Internal server error."] }
            return ["code": .int(Int64(error.code)), "error": .string(error.message)]
        case .unauthorized:
            return ["code": 119, "error": "unauthorized"]
        case .masterKeyRequired:
            return ["code": 119, "error": "unauthorized: master key is required"]
        case .noRoute(let method, let path):
            return ["code": 107, "error": .string("cannot route \(method) \(path)")]
        }
    }
}

extension ParseError {
    /// The Parse error of a failure (the HTTP-level refusals as their batch codes).
    init(_ failure: ParseFailure) {
        switch failure {
        case .parse(let error): self = error
        case .unauthorized, .masterKeyRequired: self = .operationForbidden("unauthorized")
        case .noRoute(let method, let path): self = .invalidJSON("cannot route \(method) \(path)")
        }
    }

    /// A Cloud Code failure as Parse words it (141 script failed, 143 webhook error).
    init(_ error: CloudError) {
        switch error.code {
        case 141: self = .scriptFailed(error.message)
        case 143: self = .webhookError(error.message)
        default: self = .internalError(error.message)
        }
    }
}
