import ParleyAccounts
import ParleyFiles
import ParleyHTTP
import ParleyJSON

extension ParseAPI {
    /// Parse's Files API: upload (`POST /files/:name`, raw body), download (`GET
    /// /files/:appId/:name`, public as Parse Server's default), delete (master key).
    func registerFileEndpoints(on group: RouterGroup) {
        route(.post, "/files", on: group, ParseEndpoint(rawBody: true) { _, _ in throw ParseError.invalidFileName("Filename not provided.") })
        route(.post, "/files/:filename", on: group, ParseEndpoint(rawBody: true) { api, q in try await api.uploadFile(q) })
        route(.delete, "/files/:filename", on: group, ParseEndpoint(requiresMaster: true) { api, q in try await api.deleteFile(q) })
        group.on(.get, "/files/:appId/:filename") { [self] request, _ in await downloadFile(request) }
    }

    func uploadFile(_ request: ParseRequest) async throws -> ParseResponse {
        guard let files else { throw ParseError.fileSaveError("File storage is not configured.") }
        try files.upload.check(request.auth)
        guard let body = request.rawBody else { throw ParseError.fileSaveError("Invalid file upload.") }
        let clientName = request.parameter("filename")
        if let declared = body.declaredLength, declared > files.maxUploadBytes {
            throw FileError.tooLarge(maxBytes: files.maxUploadBytes).uploadError(file: clientName)
        }
        do {
            let name = try FileName.make(clientName: clientName, contentType: body.contentType)
            _ = try await files.storage.store(name, contentType: body.contentType ?? name.contentType, maxBytes: files.maxUploadBytes, body: body.next)
            let url = fileURL(name, baseURL: request.baseURL)
            return ParseResponse(status: .created, json: .object(["url": .string(url), "name": .string(name.value)]), headers: [("Location", url)])
        } catch {
            switch error {
            case .storage(let reason): logger.error("file upload failed", [("file", clientName), ("error", reason)])
            case .bodyFailed(let reason): logger.info("file upload body failed", [("file", clientName), ("error", reason)])
            default: break
            }
            throw error.uploadError(file: clientName)
        }
    }

    func deleteFile(_ request: ParseRequest) async throws -> ParseResponse {
        guard let files else { throw ParseError.fileDeleteError("Could not delete file.") }
        do {
            try await files.storage.delete(try FileName(stored: request.parameter("filename")))
        } catch {
            if case .storage(let reason) = error { logger.error("file delete failed", [("error", reason)]) }
            throw ParseError.fileDeleteError("Could not delete file.")
        }
        return ParseResponse(body: [])
    }

    /// `https://host/parse/files/<appId>/<name>`, the URL Parse gives a stored file.
    func fileURL(_ name: FileName, baseURL: String) -> String {
        baseURL + "/files/" + PercentEncoding.queryValue(configuration.applicationID) + "/" + PercentEncoding.queryValue(name.value)
    }

    func downloadFile(_ request: HTTPRequest) async -> HTTPResponse {
        guard request.parameters["appId"] == configuration.applicationID else {
            return HTTPResponse(status: .forbidden, headers: Self.jsonHeaders, body: Array(#"{"error":"Invalid application ID."}"#.utf8))
        }
        guard let files, let stored = request.parameters["filename"], let name = try? FileName(stored: stored) else { return Self.fileNotFound }
        let found: FileMetadata?
        do {
            found = try await files.storage.metadata(name)
        } catch {
            // Parse Server answers a storage failure on download as a missing file too.
            if case .storage(let reason) = error { logger.error("file download failed", [("file", name.value), ("error", reason)]) }
            return Self.fileNotFound
        }
        guard let metadata = found else { return Self.fileNotFound }
        var headers = HTTPHeaders()
        headers.add("Content-Type", name.contentType)
        headers.add("ETag", metadata.etag)
        headers.add("Last-Modified", HTTPDate.format(secondsSinceEpoch: Int(metadata.modified)))
        headers.add("Accept-Ranges", "bytes")
        headers.add("X-Content-Type-Options", "nosniff")
        if let tags = request.headers["If-None-Match"], Self.matches(tags, metadata.etag) {
            return HTTPResponse(status: .notModified, headers: headers)
        }
        var range = 0..<metadata.size
        var status = HTTPStatus.ok
        if let header = request.headers["Range"], request.headers["If-Range"].map({ $0 == metadata.etag }) ?? true {
            switch ByteRange.parse(header, size: metadata.size) {
            case .whole: break
            case .part(let part):
                range = part
                status = .partialContent
                headers.add("Content-Range", "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(metadata.size)")
            case .unsatisfiable:
                headers.add("Content-Range", "bytes */\(metadata.size)")
                return HTTPResponse(status: .rangeNotSatisfiable, headers: headers)
            }
        }
        guard request.head.method != .head else {
            return HTTPResponse(status: status, headers: headers, body: .stream(length: range.count, next: { nil }))
        }
        do {
            return HTTPResponse(status: status, headers: headers, body: try await files.storage.responseBody(name, metadata: metadata, range: range))
        } catch {
            if case .storage(let reason) = error { logger.error("file download failed", [("file", name.value), ("error", reason)]) }
            return Self.fileNotFound
        }
    }

    /// Whether an `If-None-Match` list names `etag` (or is `*`).
    static func matches(_ list: String, _ etag: String) -> Bool {
        list.split(separator: ",").contains { tag in
            let trimmed = tag.trimmingSpaces()
            return trimmed == "*" || trimmed == etag || trimmed == "W/" + etag
        }
    }

    static let fileNotFound: HTTPResponse = {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain")
        return HTTPResponse(status: .notFound, headers: headers, body: Array("File not found.".utf8))
    }()

    static let jsonHeaders: HTTPHeaders = {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json; charset=utf-8")
        return headers
    }()
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var slice = self
        while slice.first == " " { slice = slice.dropFirst() }
        while slice.last == " " { slice = slice.dropLast() }
        return slice
    }
}
