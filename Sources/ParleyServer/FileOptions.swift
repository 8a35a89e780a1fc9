/// Parse's Files API settings (`--files-*`, `--max-upload-size`). docs/files.md.
public struct FileSettings: Sendable {
    /// Where uploaded files are kept (a directory shared by every node, or one per node behind
    /// sticky routing: docs/files.md).
    public var directory: String
    public var maxUploadBytes: Int
    public var enableForPublic: Bool
    public var enableForAuthenticatedUser: Bool
}

extension ServerConfig {
    /// Options of the Files API.
    static let fileOptions: [ConfigOption] = [
        ConfigOption("files-dir", env: "PARLEY_FILES_DIR", default: "",
                     "Directory for uploaded files (POST /files/:name); empty = <data-dir>/files."),
        ConfigOption("max-upload-size", env: "PARLEY_MAX_UPLOAD_SIZE", default: "20971520",
                     "Largest file upload in bytes (Parse's maxUploadSize, 20 MB); a larger Content-Length is 413, a larger chunked body 130."),
        ConfigOption("file-upload-public", env: "PARLEY_FILE_UPLOAD_PUBLIC", default: "false",
                     "Clients without a session may upload files (Parse's fileUpload.enableForPublic)."),
        ConfigOption("file-upload-authenticated", env: "PARLEY_FILE_UPLOAD_AUTHENTICATED", default: "true",
                     "Users with a session may upload files (Parse's fileUpload.enableForAuthenticatedUser)."),
    ]

    static func fileSettings(_ values: ConfigValues, dataDirectory: String) throws(ConfigError) -> FileSettings {
        FileSettings(
            directory: values.optionalString("files-dir") ?? dataDirectory + "/files",
            maxUploadBytes: try values.int("max-upload-size", in: 1...(1 << 40)),
            enableForPublic: try values.bool("file-upload-public"),
            enableForAuthenticatedUser: try values.bool("file-upload-authenticated"))
    }
}
