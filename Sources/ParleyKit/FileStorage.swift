#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ParleyJSON

/// The default `ParleyStorage`: two files in a directory of the app's, written without Foundation.
///
/// - `cursor.json` is replaced atomically: written to `cursor.json.tmp`, `fsync`ed, renamed
///   over the old one, and the directory `fsync`ed.
/// - `outbox.log` is append-only: `+{entry}` adds, `-clientMessageId` removes, each batch
///   followed by `fsync`. A torn last line (a crash mid-write) is ignored when loading. The log
///   is rewritten with only the live entries (again via a renamed temporary file) when removed
///   records outnumber live ones by `compactionSlack`.
///
/// Every system call goes through `runner`, which keeps the blocking I/O off event loops.
public final class FileStorage: ParleyStorage, @unchecked Sendable {
    public let directory: String
    private let runner: any BlockingRunner
    /// Records in the log and live entries, for compaction (touched only inside `runner` jobs,
    /// which the client issues one at a time).
    private var logRecords = 0
    private var live = OrderedOutbox()
    private let compactionSlack = 256

    /// Storage in `directory`, created with its parents (mode 0700) if missing.
    public init(directory: String, runner: any BlockingRunner = InlineRunner()) {
        self.directory = directory
        self.runner = runner
    }

    private var cursorPath: String { directory + "/cursor.json" }
    private var outboxPath: String { directory + "/outbox.log" }

    public func load() async throws(ParleyError) -> ParleyStoredState {
        try await runner.run { [self] () throws(ParleyError) -> ParleyStoredState in
            try Self.makeDirectory(directory)
            var state = ParleyStoredState()
            if let text = try Self.readFile(cursorPath), let value = try? JSONParser().parse(text),
               let cursor = CursorRecord(json: value) {
                state.cursor = cursor
            }
            let (entries, records) = try Self.replay(try Self.readFile(outboxPath) ?? "")
            live = OrderedOutbox(entries)
            logRecords = records
            state.outbox = entries
            return state
        }
    }

    public func appendOutbox(_ entries: [OutboxEntry]) async throws(ParleyError) {
        try await runner.run { [self] () throws(ParleyError) in
            var bytes: [UInt8] = []
            for entry in entries {
                bytes.append(UInt8(ascii: "+"))
                entry.json.serialize(into: &bytes)
                bytes.append(UInt8(ascii: "\n"))
            }
            try Self.append(bytes, to: outboxPath)
            live.append(entries)
            logRecords += entries.count
        }
    }

    public func removeOutbox(_ clientMessageIds: [String]) async throws(ParleyError) {
        try await runner.run { [self] () throws(ParleyError) in
            live.remove(clientMessageIds)
            if logRecords + clientMessageIds.count > 2 * live.count + compactionSlack {
                var bytes: [UInt8] = []
                for entry in live.entries {
                    bytes.append(UInt8(ascii: "+"))
                    entry.json.serialize(into: &bytes)
                    bytes.append(UInt8(ascii: "\n"))
                }
                try Self.replace(outboxPath, with: bytes, directory: directory)
                logRecords = live.count
                return
            }
            var bytes: [UInt8] = []
            for id in clientMessageIds {
                bytes.append(UInt8(ascii: "-"))
                bytes.append(contentsOf: id.utf8)
                bytes.append(UInt8(ascii: "\n"))
            }
            try Self.append(bytes, to: outboxPath)
            logRecords += clientMessageIds.count
        }
    }

    public func saveCursor(_ cursor: CursorRecord) async throws(ParleyError) {
        try await runner.run { [self] () throws(ParleyError) in
            var bytes: [UInt8] = []
            cursor.json.serialize(into: &bytes)
            try Self.replace(cursorPath, with: bytes, directory: directory)
        }
    }

    /// The installation's device id, kept in `directory/device-id`: read, or made (a random
    /// UUID) and stored on first use. Use it as `ParleyClientConfiguration.deviceId` (or the Parse
    /// `installationId` where the app has one).
    public static func persistentDeviceId(in directory: String, runner: any BlockingRunner = InlineRunner()) async throws(ParleyError) -> String {
        try await runner.run { () throws(ParleyError) -> String in
            try makeDirectory(directory)
            let path = directory + "/device-id"
            if let text = try readFile(path), ParleyUUID(text) != nil { return text }
            let id = ParleyUUID.random().uuidString
            try replace(path, with: Array(id.utf8), directory: directory)
            return id
        }
    }

    // MARK: Log format

    /// The live entries of a log and its number of complete records.
    static func replay(_ text: String) throws(ParleyError) -> ([OutboxEntry], Int) {
        var added: [OutboxEntry] = []
        var seen = Set<String>()
        var removed = Set<String>()
        var records = 0
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        // The last piece has no newline after it: a record torn by a crash, or empty.
        lines.removeLast()
        for line in lines {
            records += 1
            guard let first = line.first else { continue }
            let rest = line.dropFirst()
            if first == "+", let value = try? JSONParser().parse(String(rest)), let entry = OutboxEntry(json: value) {
                if seen.insert(entry.clientMessageId).inserted { added.append(entry) }
            } else if first == "-" {
                removed.insert(String(rest))
            }
        }
        let entries = added.filter { !removed.contains($0.clientMessageId) }
        return (entries, records)
    }

    // MARK: System calls

    /// Creates `path` and any missing parents (mode 0700).
    static func makeDirectory(_ path: String) throws(ParleyError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { throw .storage(operation: "mkdir \(prefix)", errno: errno) }
        }
    }

    /// The whole file as text, nil if it does not exist.
    static func readFile(_ path: String) throws(ParleyError) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .storage(operation: "open \(path)", errno: errno)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .storage(operation: "read \(path)", errno: errno)
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func append(_ bytes: [UInt8], to path: String) throws(ParleyError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage(operation: "open \(path)", errno: errno) }
        defer { close(fd) }
        try writeAll(fd, bytes, path: path)
        guard fsync(fd) == 0 else { throw .storage(operation: "fsync \(path)", errno: errno) }
    }

    /// Replaces `path` atomically with `bytes`.
    static func replace(_ path: String, with bytes: [UInt8], directory: String) throws(ParleyError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage(operation: "open \(temporary)", errno: errno) }
        do throws(ParleyError) {
            try writeAll(fd, bytes, path: temporary)
            guard fsync(fd) == 0 else { throw ParleyError.storage(operation: "fsync \(temporary)", errno: errno) }
        } catch {
            close(fd)
            throw error
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw .storage(operation: "rename \(temporary)", errno: errno) }
        let directoryFD = open(directory, O_RDONLY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(ParleyError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .storage(operation: "write \(path)", errno: errno)
            }
            offset += n
        }
    }
}
