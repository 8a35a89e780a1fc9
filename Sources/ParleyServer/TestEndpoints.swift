import ParleyHTTP
import ParleyNet

/// Endpoints that exist only with `--enable-test-endpoints`, for the test suites.
struct TestEndpoints: Sendable {
    let group: EventLoopGroup

    func register(on router: Router) {
        // A request that takes `ms` milliseconds: graceful-shutdown tests keep it in flight.
        router.on(.get, "/test/sleep") { [group] request, _ in
            let milliseconds = min(Int(request.queryParameter("ms") ?? "") ?? 100, 60_000)
            await (EventLoop.current ?? group.next()).sleep(for: .milliseconds(milliseconds))
            return HTTPResponse(status: .ok, body: "slept \(milliseconds) ms")
        }
    }
}
