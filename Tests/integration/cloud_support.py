"""Helpers for the Cloud Code integration test (imported, not run as a suite).

WebhookService is a Cloud Code webhook service written for the tests, in the shape of the
example in docs/cloud-code.md: one HTTP endpoint per hook, `POST` with Parse's JSON request body,
answering `{"success": …}` or `{"error": …}`. Each path's behaviour is a Python function set by
the test (`service.on(path, handler)`); every request is recorded (path, headers, body).
A handler returns the answer object, or a `Raw(status, bytes, delay)` for misbehaviour (slow,
not JSON, huge).
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import check, log  # noqa: E402,F401  (re-exported)

APP_ID = "cloud-app"
MASTER_KEY = "cloud-master"
WEBHOOK_KEY = "hook-secret"


class Raw:
    """A raw answer: status, body bytes (or a byte count to stream), and a delay before it."""

    def __init__(self, status=200, body=b"", delay=0.0, stream_bytes=0):
        self.status, self.body, self.delay, self.stream_bytes = status, body, delay, stream_bytes


class WebhookService:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []  # dicts: path, headers (lower-case names), body (parsed JSON or None), at
        self.handlers = {}
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                record = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body, "at": time.time()}
                with service.lock:
                    service.requests.append(record)
                    handler = service.handlers.get(self.path)
                if handler is None:
                    return self.answer(Raw(404, b'{"error":"no such hook"}'))
                result = handler(body, record)
                if not isinstance(result, Raw):
                    result = Raw(200, json.dumps(result).encode())
                self.answer(result)

            def answer(self, raw):
                if raw.delay:
                    time.sleep(raw.delay)
                try:
                    self.send_response(raw.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(raw.stream_bytes or len(raw.body)))
                    self.end_headers()
                    if raw.stream_bytes:
                        chunk = b" " * 65536
                        sent = 0
                        while sent < raw.stream_bytes:
                            self.wfile.write(chunk)
                            sent += len(chunk)
                    else:
                        self.wfile.write(raw.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                error = sys.exc_info()[1]
                if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def on(self, path, handler):
        with self.lock:
            self.handlers[path] = handler

    def received(self, path):
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def clear(self):
        with self.lock:
            self.requests.clear()


def parse(server, method, path, body=None, master=False, token=None, headers=None, timeout=60):
    """A /parse request to `server`: (status, parsed JSON answer, response headers)."""
    sent = {"X-Parse-Application-Id": APP_ID, "Content-Type": "application/json"}
    if master:
        sent["X-Parse-Master-Key"] = MASTER_KEY
    if token:
        sent["X-Parse-Session-Token"] = token
    sent.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.http_url + "/parse" + path, data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null"), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), dict(error.headers)


def wait_for(what, condition, timeout=20.0, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting until {what}")
