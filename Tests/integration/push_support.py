"""Helpers for the push integration tests and bench/push (imported, not run as a suite).

GorushSink is a gorush-compatible push gateway written for the tests: `POST /api/push` with
{"notifications":[…]}, answered like gorush in sync mode ({"success":"ok","counts":N,"logs":[
failed-push entries]}). It records every notification it receives and can be told to fail
(HTTP 500), to hang up, to be slow, or to reject tokens. Installations and jobs are made with
SQL (the rows the Parse API and the realtime layer would make).
"""
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from realtime_support import REPO, check, log, parley_binary  # noqa: F401  (re-exported)


class GorushSink:
    """A gorush-compatible gateway on 127.0.0.1 and a free port, in a background thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.received = []  # dicts: notification, accepted, at (time.time())
        self.requests = 0
        self.fail_next = 0
        self.fail_all = False
        self.hang_up = False
        self.delay = 0.0
        self.reject = {}  # token -> error
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with sink.lock:
                    sink.requests += 1
                    failing = sink.fail_all or sink.fail_next > 0
                    if sink.fail_next > 0:
                        sink.fail_next -= 1
                    hang_up, delay, reject = sink.hang_up, sink.delay, dict(sink.reject)
                if hang_up:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                try:
                    notifications = json.loads(body)["notifications"]
                except (ValueError, KeyError, TypeError):
                    return self.reply(400, {"code": 400, "message": "Missing notifications field."})
                now = time.time()
                logs = []
                records = []
                for item in notifications:
                    token = (item.get("tokens") or [""])[0]
                    error = reject.get(token)
                    records.append({"notification": item, "accepted": not failing and error is None, "at": now})
                    if error:
                        logs.append({"type": "failed-push", "platform": "ios", "token": token, "message": item.get("message", ""),
                                     "error": error, "notif_id": item.get("notif_id", "")})
                with sink.lock:
                    sink.received.extend(records)
                if delay:
                    time.sleep(delay)
                if failing:
                    return self.reply(500, {"error": "gateway down"})
                self.reply(200, {"success": "ok", "counts": len(notifications), "logs": logs})

            def reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # A client that went away (Parley killed mid-request) is expected here.
                error = sys.exc_info()[1]
                if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def configure(self, **changes):
        with self.lock:
            for key, value in changes.items():
                setattr(self, key, value)

    def accepted(self):
        with self.lock:
            return [r for r in self.received if r["accepted"]]

    def all(self):
        with self.lock:
            return list(self.received)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_for(what, condition, timeout=15.0, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting until {what}")


def add_installation(postgres, database, installation_id, user, device_type="ios", token=None, voip_token=None):
    """An installation linked to `user` (one of the user's devices, offline until it says hello)."""
    def literal(value):
        return "NULL" if value is None else "'" + value.replace("'", "''") + "'"
    postgres.psql(database, f"""
        INSERT INTO installations (object_id, installation_id, device_type, device_token, voip_device_token, user_id)
        VALUES ({literal(installation_id[:10])}, {literal(installation_id)}, {literal(device_type)}, {literal(token)},
                {literal(voip_token)}, {literal(user)})
    """)


def jobs(postgres, database):
    """Every push job: list of dicts (id, kind, state, device, attempts, error, log)."""
    rows = postgres.psql(database, """
        SELECT json_agg(json_build_object('id', id, 'kind', kind, 'state', state, 'device', device_id, 'attempts', attempts,
                                          'error', last_error, 'log', attempt_log, 'call', call_id, 'count', message_count)
                        ORDER BY id)
          FROM push_jobs
    """)
    return json.loads(rows) if rows else []


def parley_push(database_url, *arguments):
    """Runs `parley push …` against the database; returns (exit code, stdout, stderr)."""
    result = subprocess.run([parley_binary(), "push", *arguments, "--database-url", database_url,
                             "--migrations-dir", os.path.join(REPO, "migrations")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    return result.returncode, result.stdout, result.stderr


def metric(server, name):
    """The value of an unlabelled metric (or the first sample of a family) from /metrics."""
    import urllib.request
    with urllib.request.urlopen(server.http_url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return None
