#!/usr/bin/env python3
"""Email verification and password reset end to end: `parley serve` with --verify-user-emails
and --prevent-login-with-unverified-email mails through the aiosmtpd stand-in; the mailed links
are followed in headless Chromium (Debian's chromium and chromium-driver, driven by Selenium),
which fills in the reset form. Also: Parse's answers of the request endpoints, single-use and
expired links, forged tokens, a reset flood for one email (throttled), HTML in the app name and
a username escaped, every session revoked on reset, the password policy on the reset page, and
a server killed right after accepting a reset request sending the mail after its restart.

No fixed waits: mails are waited for (the outbox rows all `sent`, or the stand-in holding them),
every form submission waits for the next page, and the server binds port 0: its public URL names
a host (mail.parley.test) that Chromium maps to the port the server reported."""
import email
import email.policy
import os
import re
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from identity_support import Parse  # noqa: E402
from realtime_support import ParleyServer, TempPostgres, check, free_port, log  # noqa: E402
from smtp_standin import SMTPStandIn  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

MASTER = "mail-master"
APP_NAME = "<b>Evil</b> & Co"
PUBLIC = "http://mail.parley.test"
# Generous on a busy 2-core machine: each wait ends as soon as its event happens.
DEADLINE = 90


def wait_for(what, condition, timeout=DEADLINE, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting until {what}")


def expect(result, status, code=None, what=""):
    got, body, _ = result
    check(got == status, f"{what}: status {got} != {status}: {body}")
    if code is not None:
        check(isinstance(body, dict) and body.get("code") == code, f"{what}: {body} is not code {code}")
    return body


def parts(message):
    """(subject, text, html) of a delivered message."""
    parsed = email.message_from_string(message["data"], policy=email.policy.default)
    text = parsed.get_body(preferencelist=("plain",)).get_content()
    html = parsed.get_body(preferencelist=("html",)).get_content()
    return str(parsed["Subject"]), text, html


def mails_to(smtp, address):
    return [m for m in smtp.state()["messages"] if address in m["to"]]


def link_in(message):
    _, text, _ = parts(message)
    found = re.search(r"(http://\S+)", text)
    check(found, f"a link in the mail: {text}")
    return found.group(1)


def browser(port, attempts=3):
    """Headless Chromium resolving mail.parley.test to the server's port (a start that fails on a
    busy machine is tried again)."""
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=800,600",
                     f"--host-resolver-rules=MAP mail.parley.test 127.0.0.1:{port}"):
        options.add_argument(argument)
    for attempt in range(attempts):
        try:
            driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
            driver.set_page_load_timeout(DEADLINE)
            return driver
        except Exception as error:  # noqa: BLE001 (selenium raises several kinds on a slow start)
            if attempt == attempts - 1:
                raise
            log(f"Chromium did not start ({error!r}), trying again")


def submit(driver):
    """Clicks the form's button and waits until the next page replaced the form."""
    button = driver.find_element(By.ID, "submit")
    button.click()
    WebDriverWait(driver, DEADLINE).until(expected_conditions.staleness_of(button))
    WebDriverWait(driver, DEADLINE).until(lambda d: d.execute_script("return document.readyState") == "complete")


def direct(url, server):
    """A public URL (mail.parley.test) as the server's own address, for urllib."""
    return url.replace(PUBLIC, server.http_url, 1)


def page_status(url, server):
    try:
        with urllib.request.urlopen(direct(url, server), timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def main():
    postgres = TempPostgres()
    smtp = SMTPStandIn()
    server = None
    driver = None
    try:
        database = "identity_mail"
        url = postgres.create_database(database)
        public = PUBLIC

        def options(smtp_port):
            return ["--master-key", MASTER, "--public-url", public, "--app-name", APP_NAME,
                    "--verify-user-emails", "true", "--prevent-login-with-unverified-email", "true",
                    "--email-verify-token-validity", "1h", "--password-reset-token-validity", "1h",
                    "--password-pattern", "[0-9]", "--password-pattern-error", "The password needs a digit.",
                    "--account-mails-per-hour", "3",
                    "--smtp-host", "127.0.0.1", "--smtp-port", str(smtp_port), "--smtp-security", "none", "--smtp-timeout", "10s",
                    "--mail-poll-interval", "100ms", "--mail-backoff-base", "100ms", "--mail-backoff-max", "200ms",
                    "--mail-max-attempts", "1000"]

        server = ParleyServer(url, extra=options(smtp.smtp_port))
        server.start()
        port = server.port
        api = Parse(server.http_url, master_key=MASTER)
        pages = f"{public}/parse/apps/parley"
        driver = browser(port)

        def page(link):
            return page_status(link, server)

        # Signup: no session (login needs a verified email), emailVerified false, a mail with a link.
        alice = expect(api.call("POST", "/users", {"username": "alice", "password": "first-1", "email": "alice@example.org"}), 201,
                       what="alice signs up")
        check("sessionToken" not in alice, f"no session before verification: {alice}")
        alice_id = alice["objectId"]
        check(expect(api.call("GET", f"/users/{alice_id}", master=True), 200)["emailVerified"] is False, "emailVerified false")
        expect(api.call("POST", "/login", {"username": "alice", "password": "first-1"}), 400, 205, "login before verification")
        mail = wait_for("the verification mail", lambda: mails_to(smtp, "alice@example.org"))[0]
        subject, text, html = parts(mail)
        check(APP_NAME in subject and "alice@example.org" in text, f"verification mail: {subject!r} {text!r}")
        check("&lt;b&gt;Evil&lt;/b&gt; &amp; Co" in html and "<b>Evil</b>" not in html, f"app name escaped in the HTML mail: {html}")
        link = link_in(mail)
        check(link.startswith(f"{pages}/verify_email?token="), f"link from --public-url: {link}")
        expires = postgres.psql(database, "SELECT round(extract(epoch FROM expires_at - created_at)) FROM user_tokens WHERE kind = 'verify_email'").strip()
        check(expires == "3600", f"verification link valid for --email-verify-token-validity: {expires}")

        driver.get(link)
        check("alice" in driver.find_element(By.ID, "success").text, "Chromium shows the verified page")
        check(driver.title.startswith(APP_NAME), f"app name as text in the title: {driver.title!r}")
        check(driver.find_element(By.TAG_NAME, "h1").text == APP_NAME, "app name as text, not markup")
        status, _ = page(link)
        check(status == 400, f"a verification link works once: {status}")
        check(expect(api.call("GET", f"/users/{alice_id}", master=True), 200)["emailVerified"] is True, "emailVerified true")
        session = expect(api.call("POST", "/login", {"username": "alice", "password": "first-1"}), 200, what="login after verification")
        log("signup mail, link followed in Chromium, emailVerified, preventLoginWithUnverifiedEmail: ok")

        # verificationEmailRequest answers as Parse Server.
        expect(api.call("POST", "/verificationEmailRequest", {"email": "alice@example.org"}), 400, -1, "already verified")
        expect(api.call("POST", "/verificationEmailRequest", {"email": "nobody@example.org"}), 400, 205, "unknown email")
        expect(api.call("POST", "/verificationEmailRequest", {}), 400, 204, "no email")
        expect(api.call("POST", "/verificationEmailRequest", {"email": 7}), 400, 125, "email not a string")
        # An expired link: a second user's token, aged in the database.
        expect(api.call("POST", "/users", {"username": "carol", "password": "carol-1", "email": "carol@example.org"}), 201)
        carol_mail = wait_for("carol's verification mail", lambda: mails_to(smtp, "carol@example.org"))[0]
        postgres.psql(database, "UPDATE user_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'verify_email'")
        driver.get(link_in(carol_mail))
        check(driver.find_elements(By.ID, "invalid"), "an expired verification link is refused")
        expect(api.call("POST", "/verificationEmailRequest", {"email": "carol@example.org"}), 200, what="carol asks again")
        again = wait_for("carol's second mail", lambda: mails_to(smtp, "carol@example.org")[1:])[0]
        driver.get(link_in(again))
        check(driver.find_elements(By.ID, "success"), "the new link verifies")
        log("verificationEmailRequest codes (-1, 205, 204, 125), expired link refused, new link works: ok")

        # Password reset: {} for any email; the mailed link opens a form in Chromium.
        other = expect(api.call("POST", "/login", {"username": "alice", "password": "first-1"}), 200, what="a second session")
        expect(api.call("POST", "/requestPasswordReset", {"email": "nobody@example.org"}), 200, what="unknown email answers {}")
        expect(api.call("POST", "/requestPasswordReset", {}), 400, 204, "reset without email")
        expect(api.call("POST", "/requestPasswordReset", {"email": ["x"]}), 400, 125, "reset email not a string")
        check(expect(api.call("POST", "/requestPasswordReset", {"email": "alice@example.org"}), 200, what="reset request") == {}, "{}")
        reset = wait_for("the reset mail", lambda: [m for m in mails_to(smtp, "alice@example.org") if "reset" in parts(m)[0].lower()])[0]
        link = link_in(reset)
        check(link.startswith(f"{pages}/request_password_reset?token="), f"reset link: {link}")
        check(not mails_to(smtp, "nobody@example.org"), "nothing mailed to an unknown address")
        driver.get(link)
        check(driver.find_element(By.ID, "username").text == "alice", "the form names the user")
        driver.find_element(By.ID, "new_password").send_keys("second-2")
        driver.find_element(By.ID, "confirm_password").send_keys("second-3")
        submit(driver)
        check("do not match" in driver.find_element(By.ID, "error").text, "mismatched passwords refused")
        driver.find_element(By.ID, "new_password").send_keys("nodigits")
        driver.find_element(By.ID, "confirm_password").send_keys("nodigits")
        submit(driver)
        check("needs a digit" in driver.find_element(By.ID, "error").text, "the password policy applies on the reset page")
        driver.find_element(By.ID, "new_password").send_keys("second-2")
        driver.find_element(By.ID, "confirm_password").send_keys("second-2")
        submit(driver)
        check("alice" in driver.find_element(By.ID, "success").text, f"reset done: {driver.page_source[:400]}")
        for token in (session["sessionToken"], other["sessionToken"]):
            expect(api.call("GET", "/users/me", token=token), 400, 209, "every session revoked by the reset")
        expect(api.call("POST", "/login", {"username": "alice", "password": "first-1"}), 404, 101, "old password gone")
        expect(api.call("POST", "/login", {"username": "alice", "password": "second-2"}), 200, what="new password works")
        driver.get(link)
        check(driver.find_elements(By.ID, "invalid"), "a reset link works once")
        token = link.split("token=", 1)[1]
        form = f"token={token}&new_password=third-3&confirm_password=third-3".encode()
        request = urllib.request.Request(direct(f"{pages}/request_password_reset", server), data=form, method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        try:
            urllib.request.urlopen(request, timeout=30)
            check(False, "reusing a spent token must fail")
        except urllib.error.HTTPError as error:
            check(error.code == 400 and 'id="invalid"' in error.read().decode(), "a spent token posted again is refused")
        expect(api.call("POST", "/login", {"username": "alice", "password": "third-3"}), 404, 101, "the replay set nothing")
        log("reset mail, form in Chromium (mismatch, policy, success), sessions revoked, link single-use: ok")

        # Forged and malformed tokens, another app id, an oversized form: the invalid page, never a 500.
        for bad in ("0" * 48, "a" * 47, "<script>alert(1)</script>", "", "%00"):
            status, body = page(f"{pages}/request_password_reset?token={bad}")
            check(status == 400 and 'id="invalid"' in body and "<script>alert" not in body, f"forged token {bad!r}: {status}")
            status, _ = page(f"{pages}/verify_email?token={bad}")
            check(status == 400, f"forged verification token {bad!r}: {status}")
        status, _ = page(f"{public}/parse/apps/other-app/request_password_reset?token={'0' * 48}")
        check(status == 400, "another app id")
        big = urllib.request.Request(direct(f"{pages}/request_password_reset", server), data=b"token=" + b"a" * 20000, method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        try:
            urllib.request.urlopen(big, timeout=30)
            check(False, "an oversized form must be refused")
        except urllib.error.HTTPError as error:
            check(error.code == 413, f"oversized form: {error.code}")
        log("forged/malformed tokens, other app id, oversized form refused: ok")

        # HTML in a username is shown as text on the reset page.
        evil = '<img src=x onerror="document.title=1">'
        expect(api.call("POST", "/users", {"username": evil, "password": "evil-1", "email": "evil@example.org"}), 201)
        expect(api.call("POST", "/requestPasswordReset", {"email": "evil@example.org"}), 200)
        evil_reset = wait_for("evil's reset mail", lambda: [m for m in mails_to(smtp, "evil@example.org") if "reset" in parts(m)[0].lower()])[0]
        check(evil not in parts(evil_reset)[2], "username escaped in the HTML mail")
        driver.get(link_in(evil_reset))
        check(driver.find_element(By.ID, "username").text == evil, "username shown as text")
        check(not driver.find_elements(By.TAG_NAME, "img") and driver.title.startswith(APP_NAME), "no markup from the username ran")
        log("HTML in app name and username escaped (mail and page): ok")

        # A reset flood for one email: answered {} every time, at most --account-mails-per-hour mails.
        expect(api.call("POST", "/users", {"username": "bob", "password": "bob-1", "email": "bob@example.org"}), 201)
        wait_for("bob's verification mail", lambda: mails_to(smtp, "bob@example.org"))
        for _ in range(20):
            check(expect(api.call("POST", "/requestPasswordReset", {"email": "bob@example.org"}), 200) == {}, "flood answered {}")
        # Every mail the flood queued is a row committed before its answer: once none is left to
        # send, the stand-in holds all of them (it answers DATA after storing the message).
        wait_for("bob's mails all sent", lambda: postgres.psql(
            database, "SELECT count(*) FROM mail_outbox WHERE recipient = 'bob@example.org' AND state <> 'sent'") == "0")
        resets = [m for m in mails_to(smtp, "bob@example.org") if "reset" in parts(m)[0].lower()]
        check(len(resets) == 3, f"20 reset requests, 3 mails (--account-mails-per-hour): {len(resets)}")
        live = postgres.psql(database, "SELECT count(*) FROM user_tokens t JOIN users u ON u.object_id = t.user_id "
                                       "WHERE u.username = 'bob' AND kind = 'password_reset' AND expires_at > now()").strip()
        check(live == "1", f"only the newest reset link works: {live}")
        answers = [(page(link_in(m)), link_in(m)) for m in resets]
        opened = [link for (status, body), link in answers if status == 200 and 'id="new_password"' in body]
        check(len(opened) == 1 and sorted(status for (status, _), _ in answers) == [200, 400, 400],
              f"only the newest link opens the form: {[(status, link[-8:]) for (status, _), link in answers]}")
        newest = opened[0]
        postgres.psql(database, "UPDATE user_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'password_reset'")
        status, body = page(newest)
        check(status == 400 and 'id="invalid"' in body, "an expired reset link is refused")
        log("reset flood for one email throttled (20 requests, 3 mails, 1 live link), older and expired links refused: ok")

        # Killed right after accepting a reset request (SMTP down, so nothing was sent): the mail
        # goes out after the restart.
        server.stop()
        server = ParleyServer(url, extra=options(free_port()))
        server.port = port  # the same port again (as ParleyServer's restarts): Chromium's mapping names it
        server.start()
        api = Parse(server.http_url, master_key=MASTER)
        before = len(mails_to(smtp, "carol@example.org"))
        expect(api.call("POST", "/requestPasswordReset", {"email": "carol@example.org"}), 200, what="reset accepted")
        server.kill()
        queued = postgres.psql(database, "SELECT count(*) FROM mail_outbox WHERE recipient = 'carol@example.org' AND state <> 'sent'").strip()
        check(queued == "1", f"the mail is in the outbox when the process dies: {queued}")
        server = ParleyServer(url, extra=options(smtp.smtp_port))
        server.port = port
        server.start()
        delivered = wait_for("the reset mail after the restart", lambda: mails_to(smtp, "carol@example.org")[before:], timeout=DEADLINE)
        driver.get(link_in(delivered[0]))
        check(driver.find_element(By.ID, "username").text == "carol", "the link mailed after the restart works")
        log("server killed after accepting a reset: mail sent after restart, link works: ok")
        server.stop()
        log("identity_mail: ok")
    except BaseException:
        if server:
            log(server.log())
        raise
    finally:
        if driver:
            driver.quit()
        if server:
            server.stop()
        smtp.close()
        postgres.stop()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
