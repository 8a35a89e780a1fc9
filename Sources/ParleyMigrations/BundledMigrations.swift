/// The SQL migrations of the repository's `migrations/` directory, compiled into the binary: the
/// EmbedMigrations build plugin generates `generatedMigrationFiles` from them at every build.
public enum BundledMigrations {
    /// Every `*.sql` file of `migrations/`, as (file name, SQL text), sorted by file name.
    public static let files: [(fileName: String, sql: String)] = generatedMigrationFiles
}
