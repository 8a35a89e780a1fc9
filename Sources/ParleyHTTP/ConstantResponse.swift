/// A response that never changes, serialized once when its route is registered.
///
/// Every byte but the `Date` line is known in advance: the status line, the header lines after
/// `Date` for each `Connection` value and for HEAD, and the body. The server copies them around
/// the loop's cached `Date` line, exactly as `HTTPResponseSerializer` would have written them.
final class ConstantResponse: Sendable {
    let response: HTTPResponse
    /// Whether the handler's headers ask to close (`Connection: close`).
    let asksToClose: Bool
    private let statusLine: [UInt8]
    /// False when the response has its own `Date` field.
    private let insertsDate: Bool
    /// The lines after the status line (and `Date`), by `tailIndex`.
    private let tails: [[UInt8]]
    private let sendsBodyToGet: Bool
    private let sendsBodyToHead: Bool

    init(_ response: HTTPResponse) {
        precondition(response.body.bytes != nil, "ConstantResponse: a constant route cannot stream its body")
        self.response = response
        asksToClose = response.headers.containsToken("close", inField: "connection")
        insertsDate = !response.headers.contains("Date")
        var statusLine: [UInt8] = []
        var tails: [[UInt8]] = []
        for index in 0..<4 {
            var head: [UInt8] = []
            HTTPResponseSerializer.writeHead(
                response, keepAlive: index & 2 != 0, headRequest: index & 1 != 0, dateHeaderLine: [], into: &head)
            var end = 0
            while !(head[end] == .cr && head[end + 1] == .lf) { end += 1 }
            statusLine = Array(head[..<(end + 2)])
            tails.append(Array(head[(end + 2)...]))
        }
        self.statusLine = statusLine
        self.tails = tails
        sendsBodyToGet = HTTPResponseSerializer.sendsBody(response, headRequest: false)
        sendsBodyToHead = HTTPResponseSerializer.sendsBody(response, headRequest: true)
    }

    private static func tailIndex(keepAlive: Bool, headRequest: Bool) -> Int {
        (keepAlive ? 2 : 0) | (headRequest ? 1 : 0)
    }

    /// Writes the whole response (a body over `inlineBodyLimit` is left to the caller) and
    /// returns whether the body still has to be sent.
    func write<Output: ResponseOutput>(
        keepAlive: Bool, headRequest: Bool, dateHeaderLine: [UInt8], inlineBodyLimit: Int, into output: inout Output
    ) -> Bool {
        statusLine.withUnsafeBytes { output.append($0) }
        if insertsDate { dateHeaderLine.withUnsafeBytes { output.append($0) } }
        tails[ConstantResponse.tailIndex(keepAlive: keepAlive, headRequest: headRequest)].withUnsafeBytes { output.append($0) }
        guard headRequest ? sendsBodyToHead : sendsBodyToGet else { return false }
        let body = response.bodyBytes
        guard body.count <= inlineBodyLimit else { return true }
        body.withUnsafeBytes { output.append($0) }
        return false
    }
}
