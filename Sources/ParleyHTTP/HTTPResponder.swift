/// Answers one request an inline attempt took (see `HTTPInlineAttempt`). Call it exactly once;
/// from the connection's event loop it writes at once, from elsewhere it hops there first.
public struct HTTPResponder: Sendable {
    private enum Target: Sendable {
        case connection(HTTPServerConnection, sequence: UInt64)
        case closure(@Sendable (HTTPResponse) -> Void)
    }

    private let target: Target

    /// A responder that hands the response to `answer` (for tests and adapters).
    public init(_ answer: @escaping @Sendable (HTTPResponse) -> Void) {
        target = .closure(answer)
    }

    init(connection: HTTPServerConnection, sequence: UInt64) {
        target = .connection(connection, sequence: sequence)
    }

    public func callAsFunction(_ response: HTTPResponse) {
        switch target {
        case .connection(let connection, let sequence): connection.respond(sequence, response)
        case .closure(let answer): answer(response)
        }
    }
}
