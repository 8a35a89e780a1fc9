import ParleyAccounts
import ParleyHTTP
import ParleyJSON

/// What a Parse endpoint answers: a status, a JSON body and extra headers.
struct ParseResponse: Sendable {
    var status: HTTPStatus
    var body: JSONValue
    var headers: [(String, String)]
    /// Already serialized JSON, sent instead of `body` when set.
    var rawBody: [UInt8]?

    init(status: HTTPStatus = .ok, body: JSONValue, headers: [(String, String)] = []) {
        self.status = status
        self.body = body
        self.headers = headers
    }

    static func ok(_ object: JSONObject) -> ParseResponse { ParseResponse(body: .object(object)) }

    /// A 200 response whose body is already JSON text.
    static func serialized(_ bytes: [UInt8]) -> ParseResponse {
        var response = ParseResponse(body: .null)
        response.rawBody = bytes
        return response
    }
    static let empty = ParseResponse(body: .object(JSONObject()))
}

/// Everything a request can fail with before or inside an endpoint.
enum ParseFailure: Error, Sendable {
    /// A Parse error: `{"code":N,"error":"…"}`.
    case parse(ParseError)
    /// Missing or wrong application id or key: 403 `{"error":"unauthorized"}`, as Parse Server.
    case unauthorized
    /// No endpoint for this method and path.
    case noRoute(method: String, path: String)

    init(_ error: ParseError) { self = .parse(error) }
}

/// The single place where failures become HTTP responses.
enum ParseErrorMapping {
    /// Parse Server's statuses: 101 → 404, internal (1) → 500, every other code → 400.
    static func status(for error: ParseError) -> HTTPStatus {
        switch error.code {
        case 101: .notFound
        case 1: .internalServerError
        default: .badRequest
        }
    }

    /// The body Parse Server sends for an error.
    static func body(for error: ParseError) -> JSONValue {
        if case .internalError = error {
            return ["code": 1, "message": "Internal server error."]
        }
        return ["code": .int(Int64(error.code)), "error": .string(error.message)]
    }

    static func response(for failure: ParseFailure) -> ParseResponse {
        switch failure {
        case .parse(let error):
            return ParseResponse(status: status(for: error), body: body(for: error))
        case .unauthorized:
            return ParseResponse(status: .forbidden, body: ["error": "unauthorized"])
        case .noRoute(let method, let path):
            return ParseResponse(status: .notFound, body: ["code": 107, "error": .string("cannot route \(method) \(path)")])
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
        case .noRoute(let method, let path):
            return ["code": 107, "error": .string("cannot route \(method) \(path)")]
        }
    }
}
