import ParleyFiles
import ParleyHTTP

/// Parse's Files API settings (`--files-*`, `--s3-*`, `--max-upload-size`). docs/files.md.
public struct FileSettings: Sendable {
    /// Where uploaded files are kept with disk storage (a directory shared by every node, or one
    /// per node behind sticky routing: docs/files.md).
    public var directory: String
    /// The bucket when `--files-storage s3`; nil = disk storage in `directory`.
    public var s3: S3Settings?
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
        ConfigOption("files-storage", env: "PARLEY_FILES_STORAGE", default: "disk",
                     "Where uploaded files are stored: disk (--files-dir) or s3 (an S3-compatible bucket, --s3-*)."),
        ConfigOption("s3-endpoint", env: "PARLEY_S3_ENDPOINT", default: "",
                     "S3 service URL (https://s3.<region>.amazonaws.com, or an S3-compatible server's); required with --files-storage s3."),
        ConfigOption("s3-bucket", env: "PARLEY_S3_BUCKET", default: "", "S3 bucket for uploaded files; required with --files-storage s3."),
        ConfigOption("s3-region", env: "PARLEY_S3_REGION", default: "us-east-1", "Region the S3 requests are signed for (AWS Signature V4)."),
        ConfigOption("s3-access-key", env: "PARLEY_S3_ACCESS_KEY", default: "", "S3 access key id."),
        ConfigOption("s3-secret-key", env: "PARLEY_S3_SECRET_KEY", default: "", "S3 secret access key (prefer the environment variable)."),
        ConfigOption("s3-path-style", env: "PARLEY_S3_PATH_STYLE", default: "false",
                     "Address objects as <endpoint>/<bucket>/<key> instead of <bucket>.<endpoint host>/<key>."),
        ConfigOption("s3-part-size", env: "PARLEY_S3_PART_SIZE", default: "8388608",
                     "Bytes per part of a multipart upload; smaller uploads are one PUT. Also the memory an upload holds. S3 needs at least 5 MiB."),
    ]

    static func fileSettings(_ values: ConfigValues, dataDirectory: String) throws(ConfigError) -> FileSettings {
        try FileSettings(
            directory: values.optionalString("files-dir") ?? dataDirectory + "/files",
            s3: s3Settings(values),
            maxUploadBytes: try values.int("max-upload-size", in: 1...(1 << 40)),
            enableForPublic: try values.bool("file-upload-public"),
            enableForAuthenticatedUser: try values.bool("file-upload-authenticated"))
    }

    static func s3Settings(_ values: ConfigValues) throws(ConfigError) -> S3Settings? {
        switch values.string("files-storage") {
        case "disk": return nil
        case "s3": break
        case let other: throw .invalidValue(option: "--files-storage", value: other, expected: "disk or s3")
        }
        let endpointText = values.string("s3-endpoint")
        guard let endpoint = HTTPClientURL(endpointText) else {
            throw .invalidValue(option: "--s3-endpoint", value: endpointText, expected: "an http:// or https:// URL")
        }
        guard let bucket = values.optionalString("s3-bucket") else { throw .missingValue("--s3-bucket") }
        guard let accessKey = values.optionalString("s3-access-key") else { throw .missingValue("--s3-access-key") }
        guard let secretKey = values.optionalString("s3-secret-key") else { throw .missingValue("--s3-secret-key") }
        return S3Settings(endpoint: endpoint, bucket: bucket, region: values.string("s3-region"), accessKey: accessKey, secretKey: secretKey,
                          pathStyle: try values.bool("s3-path-style"), partBytes: try values.int("s3-part-size", in: 1...(5 << 30)))
    }
}
