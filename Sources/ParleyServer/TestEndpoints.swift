import ParleyHTTP
import ParleyJSON
import ParleyMail
import ParleyNet

/// Endpoints that exist only with `--enable-test-endpoints`, for the test suites.
struct TestEndpoints: Sendable {
    let group: EventLoopGroup
    let mail: MailService

    func register(on router: Router) {
        // A request that takes `ms` milliseconds: graceful-shutdown tests keep it in flight.
        router.on(.get, "/test/sleep") { [group] request, _ in
            let milliseconds = min(Int(request.queryParameter("ms") ?? "") ?? 100, 60_000)
            await (EventLoop.current ?? group.next()).sleep(for: .milliseconds(milliseconds))
            return HTTPResponse(status: .ok, body: "slept \(milliseconds) ms")
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
