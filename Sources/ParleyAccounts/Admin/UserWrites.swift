import ParleyJSON
import ParleyPostgres

/// How `parley user create|delete|reset-password` write a user. `parley user` (ParleyServer)
/// passes ParleyParse's `ParseUserWrites`, which runs each write through the Parse API's trigger
/// step (beforeSave/afterSave, beforeDelete/afterDelete on `_User`); `DirectUserWrites` writes
/// through the stores alone (no Cloud Code).
public protocol UserWrites: Sendable {
    /// Creates the user `body` describes (no session); answers `{objectId, createdAt, …}`.
    func create(_ body: JSONObject) async throws -> JSONObject
    /// Deletes user `objectId`.
    func delete(objectId: String) async throws
    /// Sets user `objectId`'s password and revokes its sessions.
    func setPassword(objectId: String, password: String) async throws
}

/// A write refused on its way (a Cloud Code trigger's 141, a store's error), with Parse's code.
public struct UserWriteRefused: Error, Sendable {
    public let code: Int
    public let message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }
}

/// The admin writes made through `Accounts`' stores on `db` (the operator's master key).
public struct DirectUserWrites: UserWrites {
    let accounts: Accounts
    let db: any SQLExecutor

    public init(accounts: Accounts, on db: (any SQLExecutor)? = nil) {
        self.accounts = accounts
        self.db = db ?? accounts.database
    }

    public func create(_ body: JSONObject) async throws -> JSONObject {
        try await accounts.users.signUp(body: body, auth: .master, createSession: false, on: db).json
    }

    public func delete(objectId: String) async throws {
        try await accounts.users.delete(objectId: objectId, auth: .master, on: db)
    }

    public func setPassword(objectId: String, password: String) async throws {
        try await accounts.users.resetPassword(objectId: objectId, password: password, on: db)
    }
}
