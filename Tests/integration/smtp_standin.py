"""A local SMTP server standing in for the mail relay (aiosmtpd), with a control API.

Importable (`SMTPStandIn()` runs it in background threads) or run as a script: it prints
`PORT <control port>` first and serves until its stdin closes. `--tls CERT KEY` makes the SMTP
port offer STARTTLS with that certificate and adds an implicit-TLS port (`smtps_port`).
Control over HTTP:

  GET  /control/state      {"smtp_port", "smtps_port", "sessions", "data_started", "tls_sessions",
                            "messages": [{"from", "to", "data", "tls"}]}
  POST /control/behaviour  {"auth": {"user": "password"} (AUTH required, PLAIN and LOGIN),
                            "tempfail_rcpt": n (answer 451 to the next n RCPT),
                            "reject": ["addr"] (550 for these recipients),
                            "hang_data": bool (never answer the end of DATA),
                            "ehlo": bool (false: 502 to EHLO, HELO only)}
"""
import asyncio
import json
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult


def listening_socket():
    """A socket bound to 127.0.0.1 port 0 (the kernel's choice, so no other process can hold it)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


class SMTPStandIn:
    def __init__(self, tls=None):
        self.lock = threading.Lock()
        self.messages = []
        self.sessions = 0
        self.data_started = 0
        self.auth = None
        self.tempfail_rcpt = 0
        self.reject = set()
        self.hang_data = False
        self.ehlo = True
        stand_in = self

        class Handler:
            async def handle_EHLO(self, server, session, envelope, hostname, responses):
                with stand_in.lock:
                    stand_in.sessions += 1
                    allow = stand_in.ehlo
                if not allow:
                    return ["502 5.5.1 EHLO not supported"]
                session.host_name = hostname
                return responses

            async def handle_HELO(self, server, session, envelope, hostname):
                with stand_in.lock:
                    stand_in.sessions += 1
                session.host_name = hostname
                return "250 stand-in"

            async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
                with stand_in.lock:
                    if address in stand_in.reject:
                        return "550 5.1.1 no such user"
                    if stand_in.tempfail_rcpt > 0:
                        stand_in.tempfail_rcpt -= 1
                        return "451 4.3.0 try again later"
                envelope.rcpt_tos.append(address)
                return "250 OK"

            async def handle_DATA(self, server, session, envelope):
                with stand_in.lock:
                    stand_in.data_started += 1
                    hang = stand_in.hang_data
                if hang:
                    await asyncio.sleep(3600)
                with stand_in.lock:
                    stand_in.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                                              "data": envelope.original_content.decode("utf-8", "replace"),
                                              "tls": server.transport.get_extra_info("ssl_object") is not None})
                return "250 2.0.0 queued"

        def authenticator(server, session, envelope, mechanism, auth_data):
            with stand_in.lock:
                users = stand_in.auth or {}
            ok = users.get(auth_data.login.decode()) == auth_data.password.decode()
            return AuthResult(success=ok, handled=False)

        context = None
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)

        class StandInController(Controller):
            """Serves on a socket already bound to port 0 (`port` is read back from it)."""

            def __init__(self, handler, sock, **kwargs):
                self.sock = sock
                super().__init__(handler, hostname="127.0.0.1", port=sock.getsockname()[1], **kwargs)

            def _create_server(self):
                return self.loop.create_server(self._factory_invoker, sock=self.sock, ssl=self.ssl_context)

            def factory(self):
                with stand_in.lock:
                    required = stand_in.auth is not None
                return SMTP(self.handler, authenticator=authenticator, auth_required=required, auth_require_tls=False,
                            hostname="stand-in", tls_context=context)

        self.controller = StandInController(Handler(), listening_socket())
        self.smtp_port = self.controller.port
        self.controller.start()
        self.smtps_port = None
        self.implicit = None
        if context:
            class ImplicitController(StandInController):
                def factory(self):
                    with stand_in.lock:
                        required = stand_in.auth is not None
                    return SMTP(self.handler, authenticator=authenticator, auth_required=required, auth_require_tls=False,
                                hostname="stand-in")

            self.implicit = ImplicitController(Handler(), listening_socket(), ssl_context=context)
            self.smtps_port = self.implicit.port
            self.implicit.start()

    def configure(self, **changes):
        with self.lock:
            for key, value in changes.items():
                setattr(self, key, set(value) if key == "reject" else value)

    def state(self):
        with self.lock:
            return {"smtp_port": self.smtp_port, "smtps_port": self.smtps_port, "sessions": self.sessions, "data_started": self.data_started,
                    "messages": list(self.messages)}

    def close(self):
        self.controller.stop()
        if self.implicit:
            self.implicit.stop()


def main():
    tls = None
    if len(sys.argv) == 4 and sys.argv[1] == "--tls":
        tls = (sys.argv[2], sys.argv[3])
    stand_in = SMTPStandIn(tls=tls)

    class Control(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.answer(stand_in.state())

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            stand_in.configure(**body)
            self.answer(stand_in.state())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()
    stand_in.close()


if __name__ == "__main__":
    main()
