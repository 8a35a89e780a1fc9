"""Helpers for the call integration tests and bench/calls (imported, not run as a suite).

TempPostgres runs a throwaway PostgreSQL cluster on a free port; ParleyServer runs
`$PARLEY_BIN serve` against it; users and sessions are created with SQL (the rows the Parse API
would create). CallClient is one device on /v1/socket (the `websockets` library from PyPI):
requests with ids, every other frame in an event queue, and helpers for the call.* frames.
"""
import asyncio
import atexit
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def log(*args):
    print(*args, flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15"):
        candidate = f"/usr/lib/postgresql/{version}/bin/{name}"
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError(f"{name} not found")


def raise_nofile(limit=65_536):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, min(limit, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class TempPostgres:
    """A PostgreSQL cluster in a temporary directory on 127.0.0.1 and a free port (trust auth)."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="parley-calls-pg-")
        os.chmod(self.directory, 0o755)
        self.data = os.path.join(self.directory, "data")
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.directory, "postgres")
        self.stopped = True
        self._run([pg_bin("initdb"), "-D", self.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                   "--locale=C.UTF-8", "--no-sync"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            for key, value in {"listen_addresses": "127.0.0.1", "port": str(self.port), "unix_socket_directories": self.directory,
                               "max_connections": "200", "fsync": "off", "synchronous_commit": "off"}.items():
                conf.write(f"{key} = '{value}'\n")
        self._run([pg_bin("pg_ctl"), "-D", self.data, "-l", os.path.join(self.directory, "postgres.log"), "-w", "-t", "60", "start"])
        self.stopped = False
        atexit.register(self.stop)

    def _run(self, command):
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--"] + command
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}")

    def url(self, database):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name):
        self.psql("postgres", f"CREATE DATABASE {name}")
        return self.url(name)

    def psql(self, database, sql):
        result = subprocess.run([pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
                                 "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"psql failed: {result.stdout}")
        return result.stdout.strip()

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        try:
            self._run([pg_bin("pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"])
        except RuntimeError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)


def parley_binary():
    path = os.environ.get("PARLEY_BIN")
    if path:
        return path
    for build in ("release", "debug"):
        candidate = os.path.join(REPO, ".build", build, "parley")
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError("no parley binary: set PARLEY_BIN or build the package")


class ParleyServer:
    """`parley serve` on a free port against `database_url`."""

    def __init__(self, database_url, extra=(), threads=2, log_level="warning"):
        self.database_url = database_url
        self.extra = list(extra)
        self.threads = threads
        self.log_level = log_level
        self.port = free_port()
        self.log_path = tempfile.mktemp(prefix="parley-calls-", suffix=".log")
        self.process = None
        atexit.register(self.stop)

    @property
    def ws_url(self):
        return f"ws://127.0.0.1:{self.port}/v1/socket"

    @property
    def http_url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        command = [parley_binary(), "serve", "--host", "127.0.0.1", "--port", str(self.port), "--threads", str(self.threads),
                   "--database-url", self.database_url, "--migrations-dir", os.path.join(REPO, "migrations"),
                   "--log-level", self.log_level] + self.extra
        self.log_file = open(self.log_path, "a")
        self.process = subprocess.Popen(command, stdout=self.log_file, stderr=subprocess.STDOUT, preexec_fn=raise_nofile)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"parley exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.http_url + "/ready", timeout=1) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"parley did not become ready:\n{self.log()}")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-20000:]
        except OSError:
            return ""

    def request(self, method, path, token=None, bearer=True):
        headers = {}
        if token:
            if bearer:
                headers["Authorization"] = "Bearer " + token
            else:
                headers["X-Parse-Session-Token"] = token
        request = urllib.request.Request(self.http_url + path, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def create_users(postgres, database, prefix, count):
    """Creates `count` users with one session each; returns [(userId, sessionToken)]."""
    check(len(prefix) <= 3, "prefix of at most 3 characters")
    postgres.psql(database, f"""
        INSERT INTO users (object_id, username)
        SELECT '{prefix}' || lpad(i::text, {10 - len(prefix)}, '0'), '{prefix}user' || i FROM generate_series(1, {count}) i;
        INSERT INTO sessions (object_id, token, user_id, expires_at)
        SELECT 's{prefix}' || lpad(i::text, {9 - len(prefix)}, '0'), 'r:' || md5('{prefix}' || i),
               '{prefix}' || lpad(i::text, {10 - len(prefix)}, '0'), now() + interval '1 day'
          FROM generate_series(1, {count}) i;
    """)
    rows = postgres.psql(database, f"SELECT user_id, token FROM sessions WHERE object_id LIKE 's{prefix}%' ORDER BY object_id")
    return [tuple(line.split("|")) for line in rows.splitlines()]


def new_call_id():
    return str(uuid.uuid4())


class CallClient:
    """One device on /v1/socket: replies matched by request id, every other frame queued."""

    def __init__(self, ws, welcome, name):
        self.ws = ws
        self.welcome = welcome
        self.name = name
        self.next_id = 0
        self.replies = {}
        self.events = asyncio.Queue()
        self.seen = []
        self.last_seq = 0
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url, token, device, resume_after=0):
        import websockets
        ws = await websockets.connect(url, ping_interval=None, max_size=2 ** 20)
        await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device, "resumeAfter": resume_after}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if reply.get("type") != "welcome":
            await ws.close()
            raise RuntimeError(f"hello refused: {reply}")
        return cls(ws, reply, device)

    @property
    def user_id(self):
        return self.welcome["userId"]

    async def _read(self):
        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame.get("type") in ("ok", "error") and frame.get("re") in self.replies:
                    self.replies.pop(frame["re"]).set_result(frame)
                    continue
                if "seq" in frame:
                    self.last_seq = max(self.last_seq, frame["seq"])
                self.seen.append(frame)
                await self.events.put(frame)
        except Exception:  # noqa: BLE001 - a closed socket ends the reader
            return

    async def request(self, frame, timeout=30):
        self.next_id += 1
        frame = dict(frame, id=self.next_id)
        future = asyncio.get_running_loop().create_future()
        self.replies[self.next_id] = future
        await self.ws.send(json.dumps(frame))
        return await asyncio.wait_for(future, timeout)

    async def call(self, frame_type, call_id, **fields):
        """Sends `call.<frame_type>` for `call_id`; returns the reply (`ok` or `error`)."""
        return await self.request(dict({"type": "call." + frame_type, "callId": call_id}, **fields))

    async def next_event(self, kind=None, call_id=None, timeout=10):
        """The next queued frame of type `kind` (and call), skipping others."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{self.name}: no {kind} for {call_id} within {timeout} s; seen {self.seen[-6:]}")
            try:
                event = await asyncio.wait_for(self.events.get(), remaining)
            except asyncio.TimeoutError:
                raise AssertionError(f"{self.name}: no {kind} for {call_id} within {timeout} s; seen {self.seen[-6:]}") from None
            if (kind is None or event.get("type") == kind) and (call_id is None or event.get("callId") == call_id):
                return event

    async def expect_no_event(self, kind=None, seconds=0.5):
        """Fails if a frame (of type `kind`) arrives within `seconds`; others are dropped."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                event = await asyncio.wait_for(self.events.get(), remaining)
            except asyncio.TimeoutError:
                return
            if kind is None or event.get("type") == kind:
                raise AssertionError(f"{self.name}: unexpected {event}")

    async def ack(self):
        if self.last_seq:
            await self.ws.send(json.dumps({"type": "ack", "upTo": self.last_seq}))

    async def close(self):
        await self.ws.close()
        self.reader.cancel()

    def drop(self):
        """Cuts the TCP connection without a close handshake (a lost network)."""
        self.ws.transport.abort()
        self.reader.cancel()


def run(main):
    try:
        asyncio.run(main())
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
