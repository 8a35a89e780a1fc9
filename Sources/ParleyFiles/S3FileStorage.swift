#if canImport(Glibc)
import Glibc
#endif
import ParleyHTTP
import ParleyNet
import Synchronization

/// Files as objects of an S3-compatible bucket, through the event-loop HTTP client and AWS
/// Signature V4. An upload is held at most one part (`partBytes`) at a time: a smaller one is a
/// single `PUT`, a larger one a multipart upload (aborted when anything fails). A download is a
/// series of ranged `GET`s of `readChunkBytes`, each pulled as the socket drains.
public struct S3FileStorage: FileStorage {
    public let settings: S3Settings
    let client: HTTPClient
    let signer: S3Signer
    /// The wall clock in seconds, for `x-amz-date` (a test may fix it).
    let now: @Sendable () -> Int

    /// Uses its own HTTP client on `group`, sized for one part per request; `https` endpoints
    /// are verified against `tlsCAFile` (nil: the system store).
    public init(settings: S3Settings, group: EventLoopGroup, blockingPool: BlockingPool, tlsCAFile: String? = nil,
                now: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
        self.settings = settings
        var configuration = HTTPClient.Configuration(requestTimeout: settings.requestTimeout, maxRequestBytes: settings.partBytes + (64 << 10),
                                                     responseLimits: .init(maxBodyBytes: max(settings.readChunkBytes, 1 << 20)),
                                                     tlsCAFile: tlsCAFile)
        configuration.maxConnectionsPerHost = 16
        client = HTTPClient(group: group, configuration: configuration, blockingPool: blockingPool)
        signer = S3Signer(accessKey: settings.accessKey, secretKey: settings.secretKey, region: settings.region)
        self.now = now
    }

    public func store(_ name: FileName, contentType: String, maxBytes: Int, body: FileBodySource) async throws(FileError) -> Int {
        let key = name.value
        var buffer: [UInt8] = []
        var size = 0
        var uploadID: String?
        var parts: [String] = []
        do {
            while true {
                let chunk: [UInt8]?
                do { chunk = try await body() } catch let error as FileError { throw error } catch { throw FileError.bodyFailed("\(error)") }
                guard let chunk else { break }
                size += chunk.count
                guard size <= maxBytes else { throw FileError.tooLarge(maxBytes: maxBytes) }
                buffer.append(contentsOf: chunk)
                while buffer.count >= settings.partBytes {
                    if uploadID == nil { uploadID = try await createMultipartUpload(key, contentType: contentType) }
                    let part = Array(buffer[0..<settings.partBytes])
                    buffer.removeFirst(settings.partBytes)
                    parts.append(try await uploadPart(key, uploadID: uploadID!, number: parts.count + 1, bytes: part))
                }
            }
            guard size > 0 else { throw FileError.empty }
            guard let uploadID else {
                try await putObject(key, contentType: contentType, bytes: buffer)
                return size
            }
            if !buffer.isEmpty {
                let part = buffer
                buffer = []
                parts.append(try await uploadPart(key, uploadID: uploadID, number: parts.count + 1, bytes: part))
            }
            try await completeMultipartUpload(key, uploadID: uploadID, parts: parts)
            return size
        } catch {
            let failure = error as? FileError ?? .storage("\(error)")
            if let uploadID { _ = try? await send("DELETE", key: key, query: [("uploadId", uploadID)], expecting: [200, 204], what: "AbortMultipartUpload") }
            throw failure
        }
    }

    public func metadata(_ name: FileName) async throws(FileError) -> FileMetadata? {
        let response = try await send("HEAD", key: name.value, expecting: [200, 404], what: "HeadObject")
        guard response.status.code == 200 else { return nil }
        guard let length = response.headers["Content-Length"].flatMap({ Int($0) }), let etag = response.headers["ETag"] else {
            throw .storage("S3 HeadObject: no Content-Length or ETag")
        }
        let modified = response.headers["Last-Modified"].flatMap(HTTPDate.parse) ?? 0
        return FileMetadata(size: length, modified: Int64(modified), etag: etag.hasPrefix("\"") ? etag : "\"" + etag + "\"")
    }

    public func read(_ name: FileName, metadata: FileMetadata, range: Range<Int>) -> FileBodySource {
        let offset = Mutex(range.lowerBound)
        let end = range.upperBound, chunk = settings.readChunkBytes, key = name.value
        return { [self] () async throws -> [UInt8]? in
            let start = offset.withLock { $0 }
            guard start < end else { return nil }
            let last = min(start + chunk, end) - 1
            let response = try await send("GET", key: key, headers: [("Range", "bytes=\(start)-\(last)"), ("If-Match", metadata.etag)],
                                          expecting: [200, 206], what: "GetObject")
            guard response.body.count == last - start + 1 else { throw FileError.storage("S3 GetObject: \(response.body.count) bytes for a range of \(last - start + 1)") }
            offset.withLock { $0 = last + 1 }
            return response.body
        }
    }

    public func delete(_ name: FileName) async throws(FileError) {
        guard try await metadata(name) != nil else { throw .notFound }
        _ = try await send("DELETE", key: name.value, expecting: [200, 204], what: "DeleteObject")
    }

    // MARK: Requests

    private func putObject(_ key: String, contentType: String, bytes: [UInt8]) async throws(FileError) {
        _ = try await send("PUT", key: key, headers: [("Content-Type", contentType)], body: bytes, expecting: [200], what: "PutObject")
    }

    private func createMultipartUpload(_ key: String, contentType: String) async throws(FileError) -> String {
        let response = try await send("POST", key: key, query: [("uploads", "")], headers: [("Content-Type", contentType)],
                                      expecting: [200], what: "CreateMultipartUpload")
        guard let id = Self.element("UploadId", in: response.body) else { throw .storage("S3 CreateMultipartUpload: no UploadId") }
        return id
    }

    /// Sends one part; returns its ETag.
    private func uploadPart(_ key: String, uploadID: String, number: Int, bytes: [UInt8]) async throws(FileError) -> String {
        let response = try await send("PUT", key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)], body: bytes,
                                      expecting: [200], what: "UploadPart")
        guard let etag = response.headers["ETag"] else { throw .storage("S3 UploadPart: no ETag") }
        return etag
    }

    private func completeMultipartUpload(_ key: String, uploadID: String, parts: [String]) async throws(FileError) {
        var xml = "<CompleteMultipartUpload>"
        for (index, etag) in parts.enumerated() {
            xml += "<Part><PartNumber>\(index + 1)</PartNumber><ETag>" + Self.escapeXML(etag) + "</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let response = try await send("POST", key: key, query: [("uploadId", uploadID)], headers: [("Content-Type", "application/xml")],
                                      body: Array(xml.utf8), expecting: [200], what: "CompleteMultipartUpload")
        // S3 may answer 200 and report the failure in the body.
        if let code = Self.element("Code", in: response.body) { throw .storage("S3 CompleteMultipartUpload: \(code)") }
    }

    /// Signs and sends one request; a status outside `expecting` is a `.storage` error naming S3's code.
    func send(_ method: String, key: String, query: [(String, String)] = [], headers extra: [(String, String)] = [], body: [UInt8] = [],
              expecting: Set<Int>, what: String) async throws(FileError) -> HTTPClientResponse {
        let path = settings.path(key: key)
        let url = settings.url(path: path, query: query)
        let amzDate = HTTPDate.iso8601Basic(secondsSinceEpoch: now())
        let payloadHash = SHA256Digest.hex(SHA256Digest.hash(body))
        let signed = [("Host", url.authority), ("x-amz-date", amzDate), ("x-amz-content-sha256", payloadHash)] + extra
        var headers = HTTPHeaders()
        for (name, value) in signed where name != "Host" { headers.add(name, value) }
        headers.add("Authorization", signer.authorization(method: method, path: path, query: query, headers: signed,
                                                          payloadHash: payloadHash, amzDate: amzDate))
        let response: HTTPClientResponse
        do {
            response = try await client.execute(HTTPClientRequest(method: HTTPMethod(rawValue: method) ?? .get, url: url, headers: headers, body: body,
                                                                  retryOnStaleConnection: method != "POST"))
        } catch {
            throw .storage("S3 \(what): \(error)")
        }
        guard expecting.contains(response.status.code) else {
            let code = Self.element("Code", in: response.body) ?? "no error code"
            throw .storage("S3 \(what): \(response.status.code) \(code)")
        }
        return response
    }

    /// The text of the first `<name>…</name>` in an XML answer.
    static func element(_ name: String, in body: [UInt8]) -> String? {
        let open = Array(("<" + name + ">").utf8), close = Array(("</" + name + ">").utf8)
        guard let start = firstIndex(of: open, in: body, from: 0) else { return nil }
        let contentStart = start + open.count
        guard let end = firstIndex(of: close, in: body, from: contentStart) else { return nil }
        return String(decoding: body[contentStart..<end], as: UTF8.self)
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = from
        while index + needle.count <= haystack.count {
            if haystack[index] == needle[0], haystack[index..<index + needle.count].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    static func escapeXML(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
