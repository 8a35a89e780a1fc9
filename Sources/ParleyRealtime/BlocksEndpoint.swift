import ParleyHTTP
import ParleyJSON
import ParleyLog

/// `/v1/blocks`: the session user's block list. `GET` lists it (newest first), `PUT
/// /v1/blocks/:userId` or `POST /v1/blocks {"userId"}` blocks a user, `DELETE
/// /v1/blocks/:userId` unblocks. Authenticated like every `/v1` endpoint.
struct BlocksEndpoint: Sendable {
    let service: RealtimeService

    func register(on router: Router) {
        router.get("/v1/blocks") { [service] request, _ in
            let userId = try await MessagesEndpoint.authenticate(request, service: service)
            let entries: [BlockList.Entry]
            do throws(RealtimeFailure) {
                entries = try await service.blocks.list(of: userId)
            } catch {
                throw RealtimeRESTError(error)
            }
            return RealtimeRESTError.json(.ok, .object(["results": .array(entries.map { .object(Self.json($0)) })]))
        }
        router.post("/v1/blocks") { [service] request, _ in
            let userId = try await MessagesEndpoint.authenticate(request, service: service)
            guard case .object(let body)? = try? JSONParser(maxDepth: 4, maxBytes: 4096).parse(request.body) else {
                throw MessagesEndpoint.failure(.badJSON, "the body must be a JSON object")
            }
            return try await Self.block(body["userId"]?.string, by: userId, service: service)
        }
        router.put("/v1/blocks/:userId") { [service] request, _ in
            let userId = try await MessagesEndpoint.authenticate(request, service: service)
            return try await Self.block(request.parameters["userId"], by: userId, service: service)
        }
        router.delete("/v1/blocks/:userId") { [service] request, _ in
            let userId = try await MessagesEndpoint.authenticate(request, service: service)
            let target = try Self.validUser(request.parameters["userId"])
            do throws(RealtimeFailure) {
                try await service.blocks.unblock(target, by: userId)
            } catch {
                throw RealtimeRESTError(error)
            }
            return RealtimeRESTError.json(.ok, .object([:]))
        }
    }

    private static func block(_ target: String?, by userId: String, service: RealtimeService) async throws(RealtimeRESTError) -> HTTPResponse {
        let target = try validUser(target)
        do throws(RealtimeFailure) {
            return RealtimeRESTError.json(.ok, .object(json(try await service.blocks.block(target, by: userId))))
        } catch {
            throw RealtimeRESTError(error)
        }
    }

    private static func validUser(_ user: String?) throws(RealtimeRESTError) -> String {
        guard let user, !user.isEmpty, user.utf8.count <= ClientFrame.maxUserIDBytes, !user.utf8.contains(0) else {
            throw MessagesEndpoint.failure(.badRequest, "\"userId\" must be a user id (1-\(ClientFrame.maxUserIDBytes) bytes)")
        }
        return user
    }

    static func json(_ entry: BlockList.Entry) -> JSONObject {
        ["userId": .string(entry.userId), "blockedAt": .string(UTCTime.iso8601(milliseconds: entry.blockedAt))]
    }
}
