import ParleyNet

/// Receives one call per response the server writes, for metrics (Prometheus counters and
/// histograms in the wiring layer).
///
/// Called on the connection's event loop, after the response was handed to the socket: keep it
/// cheap and non-blocking.
public protocol HTTPServerObserver: Sendable {
    /// - Parameters:
    ///   - method: nil when the request line could not be parsed.
    ///   - route: the matched pattern (`/parse/classes/:className`), nil for 404s, 405s and errors.
    ///   - duration: from the loop turn that read the request head to the response being written
    ///     (zero for a response written in that same turn, such as an inline route's).
    func requestCompleted(method: HTTPMethod?, route: String?, status: HTTPStatus, duration: Duration)

    /// The recorder the server calls instead of `requestCompleted` for the responses written on
    /// `loop`. Override it to keep per-loop state that needs no locks (the default forwards
    /// every call to `requestCompleted(method:route:status:duration:)`).
    func makeLoopObserver(loop: EventLoop) -> any HTTPLoopObserver
}

extension HTTPServerObserver {
    public func makeLoopObserver(loop: EventLoop) -> any HTTPLoopObserver {
        ForwardingLoopObserver(observer: self)
    }
}

/// An observer's part for one event loop: called only on that loop's thread, so it may keep
/// plain, unlocked state (per-route caches, metric shards).
public protocol HTTPLoopObserver: AnyObject {
    /// - Parameters:
    ///   - route: the matched route (`Route.index` identifies it cheaply), nil for 404s, 405s and errors.
    ///   - nanoseconds: as `duration` in `HTTPServerObserver.requestCompleted`.
    func requestCompleted(method: HTTPMethod?, route: Route?, status: HTTPStatus, nanoseconds: UInt64)
}

/// The default loop observer: passes each call on to the shared observer.
final class ForwardingLoopObserver: HTTPLoopObserver {
    let observer: any HTTPServerObserver

    init(observer: any HTTPServerObserver) {
        self.observer = observer
    }

    func requestCompleted(method: HTTPMethod?, route: Route?, status: HTTPStatus, nanoseconds: UInt64) {
        observer.requestCompleted(method: method, route: route?.pattern, status: status, duration: .nanoseconds(Int64(clamping: nanoseconds)))
    }
}
