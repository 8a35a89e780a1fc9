#if canImport(Glibc)
import Glibc
#endif
import CLinux
import ParleyHTTP
import ParleyNet

/// Files in one local directory, one file per name. Every system call runs on the blocking pool;
/// an upload is written to a temporary file, synced and renamed, so a crash leaves either the
/// whole file or none (a leftover `.upload-*` file is removed at start).
public struct DiskFileStorage: FileStorage {
    public let directory: String
    let pool: BlockingPool
    /// Bytes read per chunk of a download.
    public static let readChunkBytes = 256 * 1024

    /// Uses `directory` (created if missing) and removes unfinished uploads left in it.
    public init(directory: String, pool: BlockingPool) throws(FileError) {
        self.directory = directory
        self.pool = pool
        try Self.prepare(directory)
    }

    static func prepare(_ directory: String) throws(FileError) {
        var prefix = directory.hasPrefix("/") ? "/" : ""
        for part in directory.split(separator: "/") {
            prefix += part
            if mkdir(prefix, 0o750) != 0 && errno != EEXIST { throw .storage("mkdir \(prefix): errno \(errno)") }
            prefix += "/"
        }
        guard let dir = opendir(directory) else { throw .storage("opendir \(directory): errno \(errno)") }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(".upload-") { unlink(directory + "/" + name) }
        }
    }

    func path(_ name: FileName) -> String { directory + "/" + name.value }

    public func store(_ name: FileName, contentType: String, maxBytes: Int, body: FileBodySource) async throws(FileError) -> Int {
        let temporary = directory + "/.upload-" + name.value
        let fd = try await blocking { () throws(FileError) -> Int32 in
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o640)
            guard fd >= 0 else { throw .storage("open: errno \(errno)") }
            return fd
        }
        var size = 0
        do {
            while true {
                let chunk: [UInt8]?
                do { chunk = try await body() } catch let error as FileError { throw error } catch { throw FileError.bodyFailed("\(error)") }
                guard let chunk else { break }
                size += chunk.count
                guard size <= maxBytes else { throw FileError.tooLarge(maxBytes: maxBytes) }
                if chunk.isEmpty { continue }
                let offset = size - chunk.count
                try await blocking { () throws(FileError) in try Self.writeAll(fd, chunk, at: offset) }
            }
            guard size > 0 else { throw FileError.empty }
            let final = path(name)
            try await blocking { () throws(FileError) in
                guard fdatasync(fd) == 0 else { throw .storage("fdatasync: errno \(errno)") }
                close(fd)
                guard rename(temporary, final) == 0 else { throw .storage("rename: errno \(errno)") }
            }
            return size
        } catch {
            let failure = error as? FileError ?? .storage("\(error)")
            _ = try? await blocking { () throws(FileError) in
                close(fd)
                unlink(temporary)
            }
            throw failure
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws(FileError) {
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, $0.count - written, off_t(offset + written)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .storage("write: errno \(errno)")
            }
            written += n
        }
    }

    public func metadata(_ name: FileName) async throws(FileError) -> FileMetadata? {
        let target = path(name)
        return try await blocking { () throws(FileError) -> FileMetadata? in
            var info = stat()
            guard stat(target, &info) == 0 else {
                if errno == ENOENT { return nil }
                throw .storage("stat: errno \(errno)")
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            let nanos = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            return FileMetadata(size: Int(info.st_size), modified: Int64(info.st_mtim.tv_sec),
                                etag: "\"" + String(nanos, radix: 16) + "-" + String(info.st_size, radix: 16) + "\"")
        }
    }

    public func read(_ name: FileName, metadata: FileMetadata, range: Range<Int>) -> FileBodySource {
        let reader = DiskFileReader(path: path(name), range: range, pool: pool)
        return { try await reader.next() }
    }

    /// Bytes of a download brought into the page cache on the blocking pool before `sendfile`
    /// sends them from the event loop.
    public static let readaheadBytes = 16 << 20

    /// The opened file as a region `sendfile` sends (a TLS connection pulls `read` instead); its
    /// first `readaheadBytes` are read into the page cache first, on the blocking pool.
    public func responseBody(_ name: FileName, metadata: FileMetadata, range: Range<Int>) async throws(FileError) -> HTTPResponseBody {
        let target = path(name)
        let fd = try await blocking { () throws(FileError) -> Int32 in
            let fd = open(target, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw errno == ENOENT ? .notFound : .storage("open: errno \(errno)") }
            if !range.isEmpty { _ = parley_readahead(fd, Int64(range.lowerBound), min(range.count, Self.readaheadBytes)) }
            return fd
        }
        return .file(FileRegion(fd: fd, range: range), fallback: read(name, metadata: metadata, range: range))
    }

    public func delete(_ name: FileName) async throws(FileError) {
        let target = path(name)
        try await blocking { () throws(FileError) in
            guard unlink(target) == 0 else {
                if errno == ENOENT { throw .notFound }
                throw .storage("unlink: errno \(errno)")
            }
        }
    }

    /// Runs `work` on the blocking pool, keeping its typed error.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () throws(FileError) -> T) async throws(FileError) -> T {
        let result: Result<T, FileError>
        do {
            result = try await pool.run { () -> Result<T, FileError> in
                do throws(FileError) { return .success(try work()) } catch { return .failure(error) }
            }
        } catch {
            throw .storage("blocking pool: \(error)")
        }
        return try result.get()
    }
}
