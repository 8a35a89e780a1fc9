/// One numbered SQL file from the migrations directory (`NNNN_name.sql`).
public struct Migration: Sendable, Equatable {
    /// The number before the first underscore.
    public var version: Int
    /// The part between the underscore and `.sql`.
    public var name: String
    /// The file name.
    public var fileName: String
    /// The file's SQL text (several statements allowed; no transaction control).
    public var sql: String

    public init(version: Int, name: String, fileName: String, sql: String) {
        self.version = version
        self.name = name
        self.fileName = fileName
        self.sql = sql
    }

    /// Parses `NNNN_name.sql` into (version, name); nil for any other shape.
    public static func parseFileName(_ fileName: String) -> (version: Int, name: String)? {
        guard fileName.hasSuffix(".sql") else { return nil }
        let stem = fileName.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_") else { return nil }
        let digits = stem[stem.startIndex..<underscore]
        let name = stem[stem.index(after: underscore)...]
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let version = Int(digits),
              !name.isEmpty else { return nil }
        return (version, String(name))
    }
}

/// Errors of `Migrator`.
public enum MigrationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No migrations directory was found or given.
    case directoryNotFound(String)
    /// The directory or a file could not be read (or a file is larger than 4 MiB).
    case unreadable(FileSystemError)
    /// A `.sql` file whose name is not `NNNN_name.sql`.
    case invalidFileName(String)
    /// Two files share a version number.
    case duplicateVersion(Int, [String])
    /// A file is not valid UTF-8 or contains a NUL byte.
    case invalidText(String)
    /// An applied migration's file was edited after it was applied.
    case checksumMismatch(version: Int, name: String, applied: String, current: String)
    /// A version recorded in `schema_migrations` has no file (the database is newer than this build, or a file was deleted).
    case appliedMigrationMissing(version: Int, name: String)
    /// A migration failed; its transaction was rolled back.
    case failed(version: Int, name: String, error: PostgresError)
    /// A migration creates an extension that only a superuser may create (not a trusted
    /// extension), and the migrating role is not one: a superuser must create it first.
    case extensionNeedsSuperuser(version: Int, name: String, extension: String, database: String)
    /// Connecting, locking or bookkeeping failed.
    case database(PostgresError)

    public var description: String {
        switch self {
        case .directoryNotFound(let detail): "migrations directory not found: \(detail)"
        case .unreadable(let error): "cannot read migrations: \(error)"
        case .invalidFileName(let name): "migration file \(name) is not named NNNN_name.sql"
        case .duplicateVersion(let version, let files): "migration version \(version) is used by several files: \(files.joined(separator: ", "))"
        case .invalidText(let name): "migration file \(name) is not valid UTF-8 text (or contains a NUL byte)"
        case .checksumMismatch(let version, let name, let applied, let current):
            "migration \(version)_\(name) was changed after it was applied (applied checksum \(applied), file checksum \(current)); never edit an applied migration: add a new one"
        case .appliedMigrationMissing(let version, let name):
            "migration \(version)_\(name) is recorded as applied but its file is missing (is this build older than the database?)"
        case .failed(let version, let name, let error): "migration \(version)_\(name) failed and was rolled back: \(error)"
        case .extensionNeedsSuperuser(let version, let name, let extensionName, let database):
            "migration \(version)_\(name) needs the PostgreSQL extension \(extensionName), which only a superuser can create "
                + "(it is not a trusted extension) and the role migrating is not one; nothing of this file was applied. "
                + "Ask a superuser to run once, in database \(database): CREATE EXTENSION IF NOT EXISTS \(extensionName) CASCADE; "
                + "then start Parley (or run parley migrate) again. See docs/postgres.md."
        case .database(let error): "migrations: \(error)"
        }
    }
}
