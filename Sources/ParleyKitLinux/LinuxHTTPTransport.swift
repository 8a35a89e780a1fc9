import ParleyHTTP
import ParleyKit

/// ParleyKit's REST requests over ParleyHTTP's client (plain `http://` only).
public struct LinuxHTTPTransport: ParleyHTTPTransport {
    public let client: HTTPClient

    public init(client: HTTPClient) {
        self.client = client
    }

    public func send(_ request: ParleyHTTPRequest, to server: ParleyServerURL) async throws(ParleyError) -> ParleyHTTPResponse {
        guard !server.secure else { throw .http("https is not supported by the Linux transport") }
        guard let method = HTTPMethod(rawValue: request.method) else { throw .invalidArgument("method \(request.method)") }
        let outgoing = HTTPClientRequest(method: method, url: HTTPClientURL(host: server.host, port: server.port, target: request.target),
                                         headers: HTTPHeaders(request.headers), body: request.body,
                                         retryOnStaleConnection: method == .get)
        do {
            let response = try await client.execute(outgoing)
            return ParleyHTTPResponse(status: response.status.code, body: response.body)
        } catch {
            throw .http(error.description)
        }
    }
}
