import ParleyHTTP
import ParleyJSON
import ParleyLog

/// `POST /v1/messages` (send, same semantics as `message.send`) and `GET /v1/messages`
/// (history with one user, newest first). Authenticated like every `/v1` endpoint
/// (`RealtimeAuthenticator.authenticate(_:)`).
struct MessagesEndpoint: Sendable {
    let service: RealtimeService

    static let defaultLimit = 50
    static let maxLimit = 200

    func register(on router: Router) {
        router.post("/v1/messages") { [service] request, context in
            let userId = try await Self.authenticate(request, service: service)
            guard case .object(let object)? = try? JSONParser(maxDepth: 16, maxBytes: 256 * 1024).parse(request.body) else {
                throw Self.failure(.badJSON, "the body must be a JSON object")
            }
            let message: SendMessageRequest
            do throws(ClientFrameError) {
                message = try SendMessageRequest.parse(object, limits: service.frameLimits, id: nil)
            } catch {
                throw Self.failure(error.code, error.message)
            }
            guard service.takeSendTokens(userId, count: 1) else { throw Self.failure(.rateLimited, "sending too fast; slow down") }
            switch await service.send(message, from: userId, device: nil, on: context.loop) {
            case .success(let sent):
                var body: JSONObject = [
                    "messageId": .string(sent.messageId),
                    "sentAt": .string(UTCTime.iso8601(milliseconds: sent.sentAt)),
                    "failed": .array(sent.failed.map { .object(["userId": .string($0), "reason": "user_not_found"]) }),
                ]
                if sent.duplicate { body["duplicate"] = true }
                return Self.json(.ok, body)
            case .failure(let failure):
                throw RealtimeRESTError(failure)
            }
        }

        router.get("/v1/messages") { [service] request, _ in
            let userId = try await Self.authenticate(request, service: service)
            guard let peer = request.queryParameter("with"), !peer.isEmpty, peer.utf8.count <= 64, !peer.utf8.contains(0) else {
                throw Self.failure(.badRequest, "query parameter \"with\" (a user id) is required")
            }
            var before: String?
            if let cursor = request.queryParameter("before"), !cursor.isEmpty {
                guard MessageID.isValid(cursor) else { throw Self.failure(.badRequest, "\"before\" must be a message id") }
                before = cursor.lowercased()
            }
            var limit = Self.defaultLimit
            if let text = request.queryParameter("limit") {
                guard let value = Int(text), value >= 1, value <= Self.maxLimit else {
                    throw Self.failure(.badRequest, "\"limit\" must be 1-\(Self.maxLimit)")
                }
                limit = value
            }
            let records: [MessageRecord]
            do throws(RealtimeFailure) {
                records = try await service.messages.history(userId: userId, with: peer, before: before, limit: limit)
            } catch {
                throw RealtimeRESTError(error)
            }
            var bytes: [UInt8] = Array("{\"results\":[".utf8)
            for (index, record) in records.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: Self.messageJSON(record))
            }
            bytes.append(contentsOf: "]}".utf8)
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/json")
            return HTTPResponse(status: .ok, headers: headers, body: bytes)
        }
    }

    static func messageJSON(_ record: MessageRecord) -> [UInt8] {
        var out = JSONWriter()
        out.raw("{\"messageId\":")
        out.string(record.id)
        out.raw(",\"from\":")
        out.string(record.from)
        out.raw(",\"to\":")
        out.value(.array(record.to.map { .string($0) }))
        out.raw(",\"text\":")
        out.string(record.text)
        out.raw(",\"headers\":")
        out.raw(record.headersJSON)
        out.raw(",\"sentAt\":")
        out.string(UTCTime.iso8601(milliseconds: record.sentAt))
        out.raw("}")
        return out.bytes
    }

    /// The user of the request's session token.
    static func authenticate(_ request: HTTPRequest, service: RealtimeService) async throws(RealtimeRESTError) -> String {
        do throws(RealtimeFailure) {
            return try await service.authenticator.authenticate(request).userId
        } catch {
            throw RealtimeRESTError(error)
        }
    }

    static func failure(_ code: RealtimeErrorCode, _ message: String) -> RealtimeRESTError {
        RealtimeRESTError(RealtimeFailure(code, message))
    }

    static func json(_ status: HTTPStatus, _ object: JSONObject) -> HTTPResponse {
        RealtimeRESTError.json(status, .object(object))
    }
}
