/// Errors of the embedded PostgreSQL cluster.
public enum EmbeddedPostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `initdb`/`pg_ctl` were not found in any searched directory.
    case binariesNotFound(searched: [String])
    /// A path holds characters pg_ctl cannot pass through its shell command (quotes, `$`, backslash, newline).
    case unsafePath(String)
    /// The unprivileged account to run PostgreSQL as (when started as root) does not exist, or runuser is missing.
    case cannotDropPrivileges(String)
    /// The unprivileged account cannot reach the cluster directory (a parent directory is not traversable).
    case directoryNotAccessible(path: String, user: String)
    /// The cluster directory holds files but is not a PostgreSQL data directory.
    case notAClusterDirectory(String)
    case fileSystem(FileSystemError)
    case process(ChildProcessError)
    /// A PostgreSQL program failed; `output` holds the end of its output or of the server log.
    case commandFailed(command: String, status: ExitStatus, output: String)
    /// Creating the database failed.
    case database(PostgresError)
    /// The cluster is not started by this instance.
    case notStarted

    public var description: String {
        switch self {
        case .binariesNotFound(let searched):
            "PostgreSQL server binaries (initdb, pg_ctl) not found; searched PATH and \(searched.joined(separator: ", ")). Install postgresql or set DATABASE_URL"
        case .unsafePath(let path): "path cannot be used for the embedded PostgreSQL (quotes, $, backslash or newline): \(path)"
        case .cannotDropPrivileges(let reason): "cannot run PostgreSQL as an unprivileged user: \(reason)"
        case .directoryNotAccessible(let path, let user):
            "user \(user) cannot access \(path): make every parent directory traversable (chmod o+x) or choose another --data-dir"
        case .notAClusterDirectory(let path): "\(path) is not empty and is not a PostgreSQL data directory"
        case .fileSystem(let error): "file system: \(error)"
        case .process(let error): "process: \(error)"
        case .commandFailed(let command, let status, let output): "\(command) failed (\(status)):\n\(output)"
        case .database(let error): "embedded PostgreSQL: \(error)"
        case .notStarted: "the embedded PostgreSQL is not started"
        }
    }
}
