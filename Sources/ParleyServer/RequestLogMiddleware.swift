import ParleyHTTP
import ParleyLog

/// Logs each routed request at debug level, and failures at warning, with the request id
/// (`request=<id>`, which the context's logger carries: it is built only when something logs).
struct RequestLogMiddleware: HTTPMiddleware {
    func handle(
        _ request: HTTPRequest, context: RequestContext,
        next: (HTTPRequest, RequestContext) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        do {
            let response = try await next(request, context)
            if context.logger.isEnabled(.debug) {
                context.logger.debug("request", [("method", request.method.rawValue), ("path", request.path), ("status", "\(response.status.code)")])
            }
            return response
        } catch {
            context.logger.warning("request failed", [("method", request.method.rawValue), ("path", request.path), ("error", "\(error)")])
            throw error
        }
    }
}
