#if canImport(Glibc)
import Glibc
#endif

/// An open file and the byte range of it a response sends with `sendfile(2)`; the descriptor
/// is closed when the region goes.
public final class FileRegion: Sendable {
    public let fd: Int32
    public let range: Range<Int>

    /// Takes ownership of `fd`.
    public init(fd: Int32, range: Range<Int>) {
        self.fd = fd
        self.range = range
    }

    deinit {
        close(fd)
    }
}

/// What `Connection.writeFile` did.
public enum FileWriteResult: Equatable, Sendable {
    /// This many bytes went to the socket (0: it is full); unless all were sent, the handler's
    /// `connectionDidDrain` follows once it takes more.
    case wrote(Int)
    /// The file ended before the range did (it shrank).
    case endOfFile
    /// The connection failed and is closed (or is TLS, which `sendfile` cannot carry).
    case failed
}
