"""Shared pieces of the files_* integration scripts: a `parley serve` with an embedded
PostgreSQL on a free port, checks, and raw HTTP helpers for the Files API."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APP_ID = "files-app"
REST_KEY = "rest-key"
MASTER_KEY = "master-key"
CHECKS = 0


def binary():
    candidates = [os.environ.get("PARLEY_BIN"), os.path.join(ROOT, ".build/release/parley"), os.path.join(ROOT, ".build/debug/parley")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    sys.exit("files: no parley binary (set PARLEY_BIN or build first)")


def check(label, actual, expected):
    global CHECKS
    if actual != expected:
        print(f"FAIL  {label}: expected {expected!r}, got {actual!r}", flush=True)
        raise SystemExit(1)
    CHECKS += 1
    print(f"ok    {label}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, condition, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.1)
    sys.exit(f"files: {what} not within {timeout} s")


class Parley:
    """A `parley serve` process with its own data directory (and embedded PostgreSQL)."""

    def __init__(self, *arguments, env=None, data_dir=None):
        self.owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="parley-files-")
        os.chmod(self.data_dir, 0o755)  # the embedded PostgreSQL runs as `postgres` when we are root
        port_file = os.path.join(self.data_dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log_path = os.path.join(self.data_dir, "serve.log")
        self.log = open(self.log_path, "a")
        environment = dict(os.environ, PARLEY_APP_ID=APP_ID, PARLEY_REST_API_KEY=REST_KEY, PARLEY_MASTER_KEY=MASTER_KEY,
                           PARLEY_PASSWORD_OPS_LIMIT="1", PARLEY_PASSWORD_MEM_LIMIT="1048576",
                           PARLEY_ALLOW_CLIENT_CLASS_CREATION="true", **(env or {}))
        self.process = subprocess.Popen([binary(), "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", port_file,
                                         "--data-dir", self.data_dir, "--migrations-dir", os.path.join(ROOT, "migrations"), *arguments],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=environment)
        deadline = time.time() + 120
        while True:
            if self.process.poll() is not None:
                self.dump()
                sys.exit(f"files: parley serve exited with {self.process.returncode}")
            if time.time() > deadline:
                self.dump()
                sys.exit("files: server not ready in 120 s")
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.port = int(open(port_file).read())
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ready", timeout=2) as response:
                        if response.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError, OSError):
                    pass
            time.sleep(0.2)

    def dump(self):
        self.log.flush()
        print(open(self.log_path).read()[-4000:])

    def vm_hwm_kib(self):
        """Peak resident set size of the server process (VmHWM), KiB."""
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return 0

    def stop(self, remove=True):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        if remove and self.owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def request(self, method, path, body=None, headers=None, master=False, timeout=60):
        """(status, headers dict lower-cased, body bytes) of one request on a new connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = {"X-Parse-Application-Id": APP_ID, "X-Parse-REST-API-Key": REST_KEY}
        if master:
            sent["X-Parse-Master-Key"] = MASTER_KEY
        sent.update(headers or {})
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def upload(self, name, data, content_type="application/octet-stream", master=True, headers=None):
        """(status, JSON) of `POST /parse/files/<name>`."""
        status, _, body = self.request("POST", f"/parse/files/{name}", body=data,
                                       headers={"Content-Type": content_type, **(headers or {})}, master=master)
        return status, json.loads(body or b"null")

    def file_path(self, url):
        """The path part of a file URL Parley answered."""
        return url[url.index("/parse/files/"):]
