import ParleyAccounts
import ParleyHTTP
import ParleyJSON
import ParleyLog
import ParleyPostgres

/// The admin CLI's user writes made through `ParseAPI.run` as master-key writes of `_User`, so
/// the class's Cloud Code triggers apply to them as to any request: beforeSave sees (and may
/// replace or refuse) the body, the after* delivery is queued in the write's transaction and
/// sent by a serving node's worker.
public struct ParseUserWrites: UserWrites {
    let api: ParseAPI

    public init(api: ParseAPI) {
        self.api = api
    }

    public func create(_ body: JSONObject) async throws -> JSONObject {
        try await write(.create, objectId: nil, body: body) { body, db in
            try await api.accounts.users.signUp(body: body, auth: .master, createSession: false, on: db).json
        }
    }

    public func delete(objectId: String) async throws {
        _ = try await write(.delete, objectId: objectId, body: [:]) { _, db in
            try await api.accounts.users.delete(objectId: objectId, auth: .master, on: db)
            return [:]
        }
    }

    /// As `PUT /users/:id {"password": …}`: beforeSave sees the user (never the password) and may refuse.
    public func setPassword(objectId: String, password: String) async throws {
        _ = try await write(.update, objectId: objectId, body: ["password": .string(password)]) { _, db in
            try await api.accounts.users.resetPassword(objectId: objectId, password: password, on: db)
            return ["updatedAt": .string(UTCTime.iso8601(milliseconds: UTCTime.nowMilliseconds()))]
        }
    }

    /// Runs `change` (with the body after beforeSave, on the trigger step's executor) as endpoint
    /// of a master-key request; a refusal comes back as `UserWriteRefused` with Parse's code.
    private func write(_ operation: ParseWrite.Operation, objectId: String?, body: JSONObject,
                       _ change: @escaping @Sendable (JSONObject, any SQLExecutor) async throws -> JSONObject) async throws -> JSONObject {
        let endpoint = ParseEndpoint { _, request in .ok(try await change(request.object, request.db)) }.writing(operation, ClassName.user)
        let request = ParseRequest(
            method: operation == .create ? .post : operation == .update ? .put : .delete,
            parameters: PathParameters(objectId.map { id -> [(name: String, value: String)] in [(name: "id", value: id)] } ?? []), query: [], body: body, bodyIsQuery: false, auth: .master,
            sessionToken: nil, baseURL: api.configuration.serverURL.publicURL ?? "", db: api.accounts.database, clientAddress: "",
            headers: HTTPHeaders([("User-Agent", "parley-cli")]))
        let response: ParseResponse
        do {
            response = try await api.run(endpoint, request)
        } catch {
            let answer = ParseErrorMapping.batchError(for: ParseFailure(error))
            throw UserWriteRefused(code: Int(answer["code"]?.int ?? 1), message: answer["error"]?.string ?? "\(error)")
        }
        guard case .object(let object)? = try? JSONParser().parse(response.body) else { return [:] }
        return object
    }
}
