import ParleyHTTP
import ParleyKit
import ParleyNet

/// ParleyKit's REST requests over ParleyHTTP's client: `http://`, or `https://` verified against
/// the client's `tlsCAFile` or the system store (SNI and ALPN `http/1.1` sent).
public struct LinuxHTTPTransport: ParleyHTTPTransport {
    public let client: HTTPClient

    public init(client: HTTPClient) {
        self.client = client
    }

    /// A transport with its own client; `tlsCAFile`: the PEM CA bundle `https` servers are
    /// verified against (nil = the system store).
    public init(group: EventLoopGroup, blockingPool: BlockingPool? = nil, tlsCAFile: String? = nil) {
        client = HTTPClient(group: group, configuration: .init(tlsCAFile: tlsCAFile), blockingPool: blockingPool)
    }

    public func send(_ request: ParleyHTTPRequest, to server: ParleyServerURL) async throws(ParleyError) -> ParleyHTTPResponse {
        guard let method = HTTPMethod(rawValue: request.method) else { throw .invalidArgument("method \(request.method)") }
        let url = HTTPClientURL(host: server.host, port: server.port, target: request.target, secure: server.secure)
        let outgoing = HTTPClientRequest(method: method, url: url, headers: HTTPHeaders(request.headers), body: request.body,
                                         retryOnStaleConnection: method == .get)
        do {
            let response = try await client.execute(outgoing)
            return ParleyHTTPResponse(status: response.status.code, body: response.body)
        } catch .tls(let error) {
            throw .tls(error.refusalReason)
        } catch {
            throw .http(error.description)
        }
    }
}
