#if canImport(Glibc)
import Glibc
#endif
import ParleyNet
import Synchronization

/// Reads one byte range of a file in chunks of `DiskFileStorage.readChunkBytes` on the blocking
/// pool; the file is opened on the first pull and closed at the end (or when the reader goes).
final class DiskFileReader: Sendable {
    private struct State: Sendable { var fd: Int32 = -1; var offset: Int; var end: Int }
    private let path: String
    private let pool: BlockingPool
    private let state: Mutex<State>

    init(path: String, range: Range<Int>, pool: BlockingPool) {
        self.path = path
        self.pool = pool
        state = Mutex(State(offset: range.lowerBound, end: range.upperBound))
    }

    deinit {
        let fd = state.withLock { $0.fd }
        if fd >= 0 { close(fd) }
    }

    func next() async throws -> [UInt8]? {
        let (fd, offset, end) = state.withLock { ($0.fd, $0.offset, $0.end) }
        guard offset < end else {
            closeFile()
            return nil
        }
        let count = min(DiskFileStorage.readChunkBytes, end - offset)
        let path = self.path
        let (opened, chunk) = try await pool.run { () throws -> (Int32, [UInt8]) in
            var descriptor = fd
            if descriptor < 0 {
                descriptor = open(path, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { throw FileError.notFound }
            }
            var bytes = [UInt8](repeating: 0, count: count)
            var filled = 0
            while filled < count {
                let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + filled, count - filled, off_t(offset + filled)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                filled += n
            }
            guard filled == count else {
                close(descriptor)
                throw FileError.storage("the file shrank while it was read")
            }
            return (descriptor, bytes)
        }
        state.withLock {
            $0.fd = opened
            $0.offset = offset + count
        }
        return chunk
    }

    private func closeFile() {
        let fd = state.withLock { s -> Int32 in
            let fd = s.fd
            s.fd = -1
            return fd
        }
        if fd >= 0 { close(fd) }
    }
}
