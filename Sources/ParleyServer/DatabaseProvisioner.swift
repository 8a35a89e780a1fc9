import ParleyLog
import ParleyPostgres

/// Finds the database to use: `DATABASE_URL`, or an embedded cluster under the data directory.
public struct DatabaseProvisioner: Sendable {
    public let databaseURL: String?
    public let dataDirectory: String
    private let logger = Logger(label: "database")

    public init(databaseURL: String?, dataDirectory: String) {
        self.databaseURL = databaseURL
        self.dataDirectory = dataDirectory
    }

    /// A connection string plus the embedded cluster to stop at shutdown, if this process owns one.
    public struct Provisioned: Sendable {
        public let connectionString: String
        public let embedded: EmbeddedPostgres?
    }

    /// Blocking: starts the embedded cluster when no URL is configured.
    ///
    /// A cluster that is already running (a `parley serve` uses it, or one was left behind by a
    /// killed server) is adopted. `ownAdopted` says whether this process then stops it when done:
    /// the server does (its predecessor is gone or it is the only user); short-lived commands such
    /// as `parley migrate` never stop a server they did not start.
    public func provision(ownAdopted: Bool) throws -> Provisioned {
        if let databaseURL {
            return Provisioned(connectionString: databaseURL, embedded: nil)
        }
        let embedded = EmbeddedPostgres(configuration: .init(dataDirectory: dataDirectory))
        logger.info("starting embedded PostgreSQL", [("dir", embedded.pgData)])
        let connectionString = try embedded.start()
        let owned = ownAdopted || !embedded.adoptedRunningServer
        return Provisioned(connectionString: connectionString, embedded: owned ? embedded : nil)
    }
}
