import ParleyAccounts
import ParleyFiles

/// Parse's Files API settings: where files go, how big one may be, who may upload.
public struct ParseFiles: Sendable {
    public var storage: any FileStorage
    /// Parse's `maxUploadSize` (20 MB by default).
    public var maxUploadBytes: Int
    public var upload: UploadPolicy

    /// Parse Server's `fileUpload` options; its defaults: only users with a session may upload.
    public struct UploadPolicy: Sendable {
        public var enableForPublic: Bool
        public var enableForAuthenticatedUser: Bool

        public init(enableForPublic: Bool = false, enableForAuthenticatedUser: Bool = true) {
            self.enableForPublic = enableForPublic
            self.enableForAuthenticatedUser = enableForAuthenticatedUser
        }

        /// Refuses an upload the policy does not allow, with Parse Server's messages.
        func check(_ auth: Auth) throws(ParseError) {
            if auth.isMaster { return }
            if auth.user != nil {
                guard enableForAuthenticatedUser else { throw .fileSaveError("File upload by authenticated user is disabled.") }
            } else {
                guard enableForPublic else { throw .fileSaveError("File upload by public is disabled.") }
            }
        }
    }

    public init(storage: any FileStorage, maxUploadBytes: Int = 20 * 1024 * 1024, upload: UploadPolicy = UploadPolicy()) {
        self.storage = storage
        self.maxUploadBytes = maxUploadBytes
        self.upload = upload
    }
}

extension FileError {
    /// The Parse error of a failed upload (`file`: the name the client gave).
    func uploadError(file: String) -> ParseError {
        switch self {
        case .invalidName(let message): .invalidFileName(message)
        case .tooLarge(let max): .fileSaveError("File size exceeds maximum allowed: \(max) bytes.")
        case .empty, .bodyFailed: .fileSaveError("Invalid file upload.")
        case .notFound, .storage: .fileSaveError("Could not store file: \(file).")
        }
    }
}
