import ParleyAccounts
import ParleyHTTP
import ParleyJSON
import ParleyLog

extension ParseAPI {
    /// `POST /verificationEmailRequest`, `POST /requestPasswordReset` (Parse endpoints) and the
    /// HTML pages their mails link to (plain routes under the mount, no keys: a browser follows them).
    func registerAccountEmails(on group: RouterGroup) {
        route(.post, "/verificationEmailRequest", on: group, ParseEndpoint(readsSession: false) { api, q in
            try await api.accounts.emails.requestVerification(email: q.body?["email"], pagesURL: try api.pagesURL())
            return .empty
        })
        route(.post, "/requestPasswordReset", on: group, ParseEndpoint(readsSession: false) { api, q in
            try await api.accounts.emails.requestPasswordReset(email: q.body?["email"], pagesURL: try api.pagesURL())
            return .empty
        })
        group.on(.get, "/apps/:appId/verify_email") { [self] request, context in await verifyEmailPage(request, context: context) }
        group.on(.get, "/apps/:appId/request_password_reset") { [self] request, context in await choosePasswordPage(request, context: context) }
        group.on(.post, "/apps/:appId/request_password_reset") { [self] request, context in await resetPasswordPage(request, context: context) }
    }

    /// `<public URL><mount>/apps/<app id>`: where mailed links point. Only `--public-url` is
    /// trusted for it: a link built from a request's `Host` would let anyone who asks for a
    /// reset of someone else's account send that person a link to a host of their choosing.
    func pagesURL() throws(ParseError) -> String {
        guard let publicURL = configuration.serverURL.publicURL else {
            throw ParseError.commandUnavailable("Email verification and password reset need the server's --public-url (the links in the mails).")
        }
        let mount = configuration.mountPath == "/" ? "" : configuration.mountPath
        return publicURL + mount + "/apps/" + PercentEncoding.queryValue(configuration.applicationID)
    }

    /// Mails a verification link after a signup or email change; a failure is logged, the write stands.
    func sendVerification(userId: String, logger: Logger) async {
        do {
            try await accounts.emails.sendVerification(userId: userId, pagesURL: try pagesURL())
        } catch {
            logger.warning("verification mail not queued", [("user", userId), ("error", "\(error)")])
        }
    }

    private var pages: AccountPages { configuration.pages }

    private func invalidLink() -> HTTPResponse {
        AccountPages.response(.badRequest, pages.render(pages.invalidLink))
    }

    private func isThisApp(_ request: HTTPRequest) -> Bool {
        request.parameters["appId"] == configuration.applicationID
    }

    private func verifyEmailPage(_ request: HTTPRequest, context: RequestContext) async -> HTTPResponse {
        guard isThisApp(request), let token = request.queryParameter("token") else { return invalidLink() }
        do {
            guard let username = try await accounts.emails.verifyEmail(token: token) else { return invalidLink() }
            return AccountPages.response(.ok, pages.render(pages.verifyEmailSuccess, ["username": username]))
        } catch {
            context.logger.error("email verification failed", [("error", "\(error)")])
            return AccountPages.response(.internalServerError, pages.render(pages.invalidLink))
        }
    }

    private func choosePassword(token: String, username: String, error: String = "", status: HTTPStatus = .ok) -> HTTPResponse {
        AccountPages.response(status, pages.render(pages.choosePassword, [
            "username": username, "token": token, "error": error, "action": "request_password_reset",
        ]))
    }

    private func choosePasswordPage(_ request: HTTPRequest, context: RequestContext) async -> HTTPResponse {
        guard isThisApp(request), let token = request.queryParameter("token") else { return invalidLink() }
        do {
            guard let target = try await accounts.emails.resetTarget(token: token) else { return invalidLink() }
            return choosePassword(token: token, username: target.username)
        } catch {
            context.logger.error("reset link check failed", [("error", "\(error)")])
            return AccountPages.response(.internalServerError, pages.render(pages.invalidLink))
        }
    }

    private func resetPasswordPage(_ request: HTTPRequest, context: RequestContext) async -> HTTPResponse {
        guard isThisApp(request) else { return invalidLink() }
        guard request.body.count <= AccountPages.maxFormBytes else {
            return AccountPages.response(.contentTooLarge, pages.render(pages.invalidLink))
        }
        // An urlencoded form is a query string: parsed as the query of a request target.
        let form = (try? HTTPRequestHead(method: .post, target: "/?" + String(decoding: request.body, as: UTF8.self)))?.queryParameters ?? []
        func field(_ name: String) -> String? { form.first { $0.name == name }?.value }
        guard let token = field("token") else { return invalidLink() }
        let password = field("new_password") ?? ""
        do {
            guard let target = try await accounts.emails.resetTarget(token: token) else { return invalidLink() }
            if let confirmation = field("confirm_password"), confirmation != password {
                return choosePassword(token: token, username: target.username, error: "The passwords do not match.", status: .badRequest)
            }
            if password.isEmpty {
                return choosePassword(token: token, username: target.username, error: "Enter a new password.", status: .badRequest)
            }
            guard let username = try await accounts.emails.resetPassword(token: token, password: password) else { return invalidLink() }
            return AccountPages.response(.ok, pages.render(pages.passwordResetSuccess, ["username": username]))
        } catch {
            switch error {
            case .validationFailed(let message), .passwordMissing(let message):
                return choosePassword(token: token, username: (try? await accounts.emails.resetTarget(token: token))??.username ?? "",
                                      error: message, status: .badRequest)
            case .tooManyRequests:
                return choosePassword(token: token, username: "", error: "Too many requests; try again in a moment.", status: .tooManyRequests)
            default:
                context.logger.error("password reset failed", [("error", "\(error)")])
                return AccountPages.response(.internalServerError, pages.render(pages.invalidLink))
            }
        }
    }
}
