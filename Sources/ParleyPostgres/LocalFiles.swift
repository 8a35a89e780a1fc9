#if canImport(Glibc)
import Glibc
#endif

/// A failed file-system call.
public struct FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var call: String
    public var path: String
    public var errno: Int32

    public init(call: String, path: String, errno: Int32) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    public var description: String {
        "\(call)(\(path)) failed: \(String(cString: strerror(errno)))"
    }
}

/// Small blocking file-system operations on Glibc (no Foundation). For startup code and blocking pools.
public enum LocalFiles {
    /// Reads a whole file; fails with EFBIG when it is larger than `limit` bytes.
    public static func read(_ path: String, limit: Int) throws(FileSystemError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(call: "read", path: path, errno: errno)
            }
            if n == 0 { break }
            guard bytes.count + n <= limit else { throw FileSystemError(call: "read", path: path, errno: EFBIG) }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return bytes
    }

    /// The last `count` bytes of a file as text (for error messages quoting a log), or "" if unreadable.
    static func tail(_ path: String, count: Int) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        let size = lseek(fd, 0, SEEK_END)
        guard size > 0 else { return "" }
        let start = max(0, Int(size) - count)
        var buffer = [UInt8](repeating: 0, count: Int(size) - start)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(start)) }
        guard n > 0 else { return "" }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Creates or truncates a file with `mode` and writes `text`.
    static func write(_ path: String, _ text: String, mode: mode_t = 0o644) throws(FileSystemError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FileSystemError(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(call: "write", path: path, errno: errno)
            }
            offset += n
        }
    }

    /// Names in a directory, without "." and "..", unsorted.
    static func list(_ path: String) throws(FileSystemError) -> [String] {
        guard let dir = opendir(path) else { throw FileSystemError(call: "opendir", path: path, errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    static func isExecutableFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
    }

    /// `mkdir -p` with `mode` for the directories it creates.
    static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(FileSystemError) {
        if isDirectory(path) { return }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if !isDirectory(prefix) {
                if mkdir(prefix, mode) != 0 && errno != EEXIST {
                    throw FileSystemError(call: "mkdir", path: prefix, errno: errno)
                }
            }
            prefix += "/"
        }
    }

    /// Removes a file; a missing file is not an error.
    static func remove(_ path: String) {
        unlink(path)
    }

    /// The canonical absolute path, or nil when it does not exist.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The target of a symbolic link, or nil.
    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Changes the owner of `path` and everything under it (symbolic links themselves, not targets).
    static func changeOwnerRecursively(_ path: String, uid: uid_t, gid: gid_t) throws(FileSystemError) {
        guard lchown(path, uid, gid) == 0 else { throw FileSystemError(call: "lchown", path: path, errno: errno) }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return }
        for name in try list(path) {
            try changeOwnerRecursively(path + "/" + name, uid: uid, gid: gid)
        }
    }

    /// Joins two path components with one slash.
    static func join(_ base: String, _ name: String) -> String {
        base.hasSuffix("/") ? base + name : base + "/" + name
    }

    /// The absolute form of `path` against the current directory, with `.` and `..` components
    /// and repeated slashes removed lexically (no symbolic link is resolved).
    static func absolute(_ path: String) -> String {
        var base = ""
        if !path.hasPrefix("/") {
            guard let cwd = getcwd(nil, 0) else { return path }
            base = String(cString: cwd)
            free(cwd)
        }
        var components: [Substring] = []
        for component in (base + "/" + path).split(separator: "/") {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }
}
