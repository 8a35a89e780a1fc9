/// Content types by file extension, both ways (the common subset of the `mime` package Parse uses).
public enum ContentType {
    static let byExtension: [String: String] = [
        "txt": "text/plain", "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "js": "application/javascript", "json": "application/json", "xml": "application/xml", "pdf": "application/pdf",
        "zip": "application/zip", "gz": "application/gzip", "bin": "application/octet-stream",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "heic": "image/heic", "heif": "image/heif", "ico": "image/x-icon", "bmp": "image/bmp",
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "ogg": "audio/ogg", "opus": "audio/opus",
        "mp4": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "m4v": "video/x-m4v",
    ]
    /// The extension `mime.getExtension` gives for each type (the first listed above wins).
    static let extensionByType: [String: String] = [
        "text/plain": "txt", "text/html": "html", "text/css": "css", "text/csv": "csv", "application/javascript": "js",
        "application/json": "json", "application/xml": "xml", "application/pdf": "pdf", "application/zip": "zip",
        "application/gzip": "gz", "application/octet-stream": "bin", "image/png": "png", "image/jpeg": "jpeg",
        "image/gif": "gif", "image/webp": "webp", "image/svg+xml": "svg", "image/heic": "heic", "image/heif": "heif",
        "image/x-icon": "ico", "image/bmp": "bmp", "audio/mpeg": "mp3", "audio/mp4": "m4a", "audio/aac": "aac",
        "audio/wav": "wav", "audio/ogg": "ogg", "audio/opus": "opus", "video/mp4": "mp4", "video/quicktime": "mov",
        "video/webm": "webm", "video/x-m4v": "m4v",
    ]

    /// The content type a stored name is served with (`application/octet-stream` when unknown).
    public static func forFileName(_ name: String) -> String {
        guard let dot = name.utf8.lastIndex(of: UInt8(ascii: ".")) else { return "application/octet-stream" }
        let ext = String(name[name.index(after: dot)...]).lowercased()
        return byExtension[ext] ?? "application/octet-stream"
    }

    /// The extension for a content type (parameters such as `; charset=utf-8` ignored).
    public static func fileExtension(for contentType: String) -> String? {
        let base = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingSpaces().lowercased() } ?? ""
        return extensionByType[base]
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        var slice = self[...]
        while slice.first == " " { slice = slice.dropFirst() }
        while slice.last == " " { slice = slice.dropLast() }
        return String(slice)
    }
}
