import ParleyLog
import ParleyMigrations
import ParleyPostgres

/// `parley migrate`: applies pending SQL migrations and exits.
public enum MigrateCommand {
    public static let options: [ConfigOption] = ServerConfig.options.filter {
        ["data-dir", "database-url", "migrations-dir", "log-level"].contains($0.key)
    }

    public static func run(_ values: ConfigValues) throws -> Int32 {
        let dataDirectory = values.string("data-dir")
        let provisioned = try DatabaseProvisioner(databaseURL: values.optionalString("database-url"), dataDirectory: dataDirectory).provision(ownAdopted: false)
        defer { try? provisioned.embedded?.stop() }
        let applied = try MigrationRunner.apply(connectionString: provisioned.connectionString, directory: values.optionalString("migrations-dir"))
        print(applied.isEmpty ? "database is up to date" : "applied \(applied.count) migration(s): " + applied.map(\.fileName).joined(separator: ", "))
        return 0
    }
}

/// Applies what is pending (blocking): the migrations compiled into the binary, or those of
/// `--migrations-dir` when given.
enum MigrationRunner {
    static func apply(connectionString: String, directory: String?) throws -> [Migration] {
        let source = directory.map(MigrationSource.directory) ?? .files(BundledMigrations.files)
        return try Migrator(connectionString: connectionString, source: source).migrate()
    }
}
