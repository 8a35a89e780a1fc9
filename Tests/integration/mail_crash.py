#!/usr/bin/env python3
"""Crash safety of the mail outbox: `parley serve` queues mails and is killed with SIGKILL while
the SMTP server (aiosmtpd stand-in) holds their DATA unanswered, so they are claimed and in
flight; after a restart every mail is delivered exactly once by the new process (its claim
expired), and the rows end `sent` after a second attempt. A mail queued by the killed process
but never claimed (SMTP down when it was queued) is delivered too."""
import json
import os
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import ParleyServer, TempPostgres, check, free_port, log  # noqa: E402
from smtp_standin import SMTPStandIn  # noqa: E402


def wait_for(what, condition, timeout=30, interval=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting until {what}")


def queue(server, to, subject):
    request = urllib.request.Request(server.http_url + "/test/mail", method="POST",
                                     data=json.dumps({"to": to, "subject": subject, "text": "line one\n.\nline three"}).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        check(response.status == 201, f"queued {subject}")
        return json.loads(response.read())["id"]


def main():
    postgres = TempPostgres()
    smtp = SMTPStandIn()
    try:
        database = "mail_crash"
        url = postgres.create_database(database)

        def options(port):
            return ["--enable-test-endpoints", "--smtp-host", "127.0.0.1", "--smtp-port", str(port), "--smtp-security", "none",
                    "--smtp-timeout", "1s", "--mail-poll-interval", "100ms", "--mail-backoff-base", "100ms", "--mail-backoff-max", "200ms"]

        # First life: two mails reach DATA and hang there; then the process dies mid-send.
        smtp.configure(hang_data=True)
        server = ParleyServer(url, extra=options(smtp.smtp_port)).start()
        for index in range(2):
            queue(server, f"user{index}@example.org", f"in flight {index}")
        wait_for("both mails are in DATA", lambda: smtp.state()["data_started"] >= 2)
        server.kill()
        states = postgres.psql(database, "SELECT string_agg(state, ',' ORDER BY id) FROM mail_outbox").strip()
        check(states == "sending,sending", f"both mails were claimed when the process died: {states}")

        # Second life with the SMTP server down: a mail queued now waits (pending), then the process dies again.
        server = ParleyServer(url, extra=options(free_port())).start()
        queue(server, "late@example.org", "queued while SMTP was down")
        wait_for("the new mail failed once", lambda: postgres.psql(
            database, "SELECT attempts FROM mail_outbox WHERE recipient = 'late@example.org'").strip() not in ("", "0"))
        server.kill()

        # Third life: the SMTP server answers; the expired claims are recovered and everything is sent once.
        smtp.configure(hang_data=False)
        server = ParleyServer(url, extra=options(smtp.smtp_port)).start()
        started = time.time()
        wait_for("all three mails were delivered", lambda: len(smtp.state()["messages"]) >= 3, timeout=60)
        wait_for("all rows are sent", lambda: postgres.psql(
            database, "SELECT count(*) FROM mail_outbox WHERE state <> 'sent'").strip() == "0", timeout=30)
        time.sleep(0.5)
        messages = smtp.state()["messages"]
        recipients = sorted(r for m in messages for r in m["to"])
        check(recipients == ["late@example.org", "user0@example.org", "user1@example.org"], f"each mail once: {recipients}")
        for message in messages:
            check("line one\r\n.\r\nline three" in message["data"], "the body survived intact (dot-stuffed)")
        attempts = postgres.psql(database, "SELECT string_agg(attempts::text, ',' ORDER BY id) FROM mail_outbox").strip()
        log(f"delivered after restart in {time.time() - started:.1f} s; attempts per mail: {attempts}")
        check(attempts.split(",")[:2] == ["2", "2"], "the in-flight mails were sent on their second attempt")
        server.stop()
        log("SIGKILL mid-send and with mail pending: every mail delivered once after restart: ok")
    except BaseException:
        for name in ("server",):
            if name in locals():
                log(locals()[name].log())
        raise
    finally:
        smtp.close()
        postgres.stop()


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
