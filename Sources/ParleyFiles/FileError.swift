/// Why a file operation failed; ParleyParse maps each case to Parse's code once.
public enum FileError: Error, Sendable, Equatable {
    /// The name breaks Parse's rule (code 122).
    case invalidName(String)
    /// The body passed the size limit (code 130, "File size exceeds maximum allowed: N bytes.").
    case tooLarge(maxBytes: Int)
    /// An empty upload (code 130, "Invalid file upload.").
    case empty
    /// No file of that name.
    case notFound
    /// The storage refused or failed (code 130 on upload, 153 on delete); the text is for logs.
    case storage(String)
    /// The body's sender failed or went away mid-upload.
    case bodyFailed(String)
}
