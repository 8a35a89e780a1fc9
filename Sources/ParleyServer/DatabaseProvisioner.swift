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

    /// A connection string plus the embedded cluster to stop at shutdown, if one was started.
    public struct Provisioned: Sendable {
        public let connectionString: String
        public let embedded: EmbeddedPostgres?
    }

    /// Blocking: starts the embedded cluster when no URL is configured.
    public func provision() throws -> Provisioned {
        if let databaseURL {
            return Provisioned(connectionString: databaseURL, embedded: nil)
        }
        let embedded = EmbeddedPostgres(configuration: .init(dataDirectory: dataDirectory))
        logger.info("starting embedded PostgreSQL", [("dir", embedded.pgData)])
        let connectionString = try embedded.start()
        return Provisioned(connectionString: connectionString, embedded: embedded)
    }
}
