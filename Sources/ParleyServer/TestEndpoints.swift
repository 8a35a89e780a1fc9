import ParleyHTTP
import ParleyJSON
import ParleyMail
import ParleyNet
import Synchronization

/// Endpoints that exist only with `--enable-test-endpoints`, for the test suites.
struct TestEndpoints: Sendable {
    let group: EventLoopGroup
    let mail: MailService
    /// How many `/test/sleep` requests are in their handler now.
    private let sleeping = SleepingCount()

    func register(on router: Router) {
        // A request that takes `ms` milliseconds: graceful-shutdown tests keep it in flight.
        router.on(.get, "/test/sleep") { [group, sleeping] request, _ in
            let milliseconds = min(Int(request.queryParameter("ms") ?? "") ?? 100, 60_000)
            sleeping.value.add(1, ordering: .relaxed)
            await (EventLoop.current ?? group.next()).sleep(for: .milliseconds(milliseconds))
            sleeping.value.subtract(1, ordering: .relaxed)
            return HTTPResponse(status: .ok, body: "slept \(milliseconds) ms")
        }
        // How many `/test/sleep` requests are in flight: a test waits for its own instead of a fixed time.
        router.on(.get, "/test/sleeping") { [sleeping] _, _ in
            HTTPResponse(status: .ok, body: "\(sleeping.value.load(ordering: .relaxed))")
        }
        // Queues a mail `{to, subject, text}` in the outbox (crash tests of the mail worker).
        router.on(.post, "/test/mail") { [mail] request, _ in
            guard case .object(let body)? = try? JSONParser().parse(request.body), let to = body["to"]?.string,
                  let recipient = try? MailAddress(to)
            else { return HTTPResponse(status: .badRequest, body: "need {to, subject, text}") }
            let template = MailTemplate(subject: body["subject"]?.string ?? "", text: body["text"]?.string ?? "")
            do {
                let id = try await mail.send(template, to: recipient, values: [:], kind: "test")
                return HTTPResponse(status: .created, body: "{\"id\":\(id)}")
            } catch {
                return HTTPResponse(status: .badRequest, body: "\(error)")
            }
        }
    }
}

/// The in-flight count of `/test/sleep`, shared by its handlers.
private final class SleepingCount: Sendable {
    let value = Atomic<Int>(0)
}
