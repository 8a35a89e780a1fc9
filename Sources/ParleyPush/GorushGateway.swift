import ParleyHTTP
import ParleyJSON

/// Sends batches of notifications to a gorush-compatible gateway: `POST {gateway}/api/push`
/// with `{"notifications":[…]}`.
public struct GorushGateway: Sendable {
    /// Why a whole batch failed (every job in it is retried).
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case transport(HTTPClientError)
        case status(Int, String)
        case unreadableResponse

        public var description: String {
            switch self {
            case .transport(let error): "gateway: \(error)"
            case .status(let code, let body): "gateway answered \(code)" + (body.isEmpty ? "" : ": \(body)")
            case .unreadableResponse: "gateway answered 200 with a body that is not gorush's JSON"
            }
        }
    }

    public let client: HTTPClient
    public let url: HTTPClientURL
    public let timeout: Duration

    /// `gateway` is the base URL (`http://gorush:8088`); `/api/push` is appended.
    public init(client: HTTPClient, gateway: HTTPClientURL, timeout: Duration) {
        self.client = client
        var url = gateway
        let base = url.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        url.target = (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/api/push"
        self.url = url
        self.timeout = timeout
    }

    public func send(_ notifications: [JSONObject]) async -> Result<GorushResponse, Failure> {
        var body: [UInt8] = []
        body.reserveCapacity(notifications.count * 400)
        JSONValue.object(["notifications": .array(notifications.map { .object($0) })]).serialize(into: &body)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Accept", "application/json")
        let response: HTTPClientResponse
        do {
            response = try await client.execute(HTTPClientRequest(method: .post, url: url, headers: headers, body: body), timeout: timeout)
        } catch {
            return .failure(.transport(error))
        }
        guard response.status.code == 200 else {
            let snippet = String(decoding: response.body.prefix(200), as: UTF8.self).filter { $0 != "\n" && $0 != "\r" }
            return .failure(.status(response.status.code, snippet))
        }
        guard let parsed = GorushResponse.parse(response.body) else { return .failure(.unreadableResponse) }
        return .success(parsed)
    }
}
