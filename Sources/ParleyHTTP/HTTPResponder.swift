/// Answers one request an inline attempt took (see `HTTPInlineAttempt`). Call it exactly once;
/// from the connection's event loop it writes at once, from elsewhere it hops there first.
public struct HTTPResponder: Sendable {
    private let answer: @Sendable (HTTPResponse) -> Void

    public init(_ answer: @escaping @Sendable (HTTPResponse) -> Void) {
        self.answer = answer
    }

    public func callAsFunction(_ response: HTTPResponse) {
        answer(response)
    }
}
