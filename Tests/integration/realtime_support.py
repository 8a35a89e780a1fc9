"""Shared helpers for the realtime integration tests (imported, not run as a suite).

TempPostgres runs a throwaway PostgreSQL cluster on a free TCP port; ParleyServer runs
`$PARLEY_BIN serve` against it. Users and sessions are created with SQL (the rows the Parse API
would create), so these tests do not depend on the accounts API.
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

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def log(*args):
    print(*args, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tools_required():
    """True under CI (`CI` or `PARLEY_REQUIRE_TOOLS` set): a check needing a setup-installed tool fails instead of skipping."""
    return bool(os.environ.get("CI") or os.environ.get("PARLEY_REQUIRE_TOOLS"))


def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15"):
        candidate = f"/usr/lib/postgresql/{version}/bin/{name}"
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError(f"{name} not found")


def raise_nofile(limit=200_000):
    """Raises RLIMIT_NOFILE (the hard limit too when running as root)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, limit)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
    except (ValueError, PermissionError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


class TempPostgres:
    """A PostgreSQL cluster in a temporary directory, on 127.0.0.1 and a free port (trust auth)."""

    def __init__(self, settings=None):
        self.directory = tempfile.mkdtemp(prefix="parley-rt-pg-")
        os.chmod(self.directory, 0o755)
        self.data = os.path.join(self.directory, "data")
        self.port = None
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.directory, "postgres")
        self._run([pg_bin("initdb"), "-D", self.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                   "--locale=C.UTF-8", "--lc-collate=C", "--no-sync"])
        options = {"listen_addresses": "127.0.0.1", "unix_socket_directories": self.directory,
                   "max_connections": "300", "shared_buffers": "256MB"}
        options.update(settings or {})
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            for key, value in options.items():
                conf.write(f"{key} = '{value}'\n")
        self._start_on_a_free_port()
        atexit.register(self.stop)
        self.stopped = False

    def _start_on_a_free_port(self, attempts=8):
        """PostgreSQL cannot bind port 0 and report it: a free port is picked, and if another
        process binds it first (the start fails with "could not bind"), the next one is tried."""
        log_path = os.path.join(self.directory, "postgres.log")
        for attempt in range(attempts):
            self.port = free_port()
            with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
                conf.write(f"port = '{self.port}'\n")
            offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
            try:
                self._run([pg_bin("pg_ctl"), "-D", self.data, "-l", log_path, "-w", "-t", "60", "start"])
                return
            except RuntimeError:
                with open(log_path, errors="replace") as f:
                    f.seek(offset)
                    tail = f.read()
                if "could not bind" not in tail or attempt == attempts - 1:
                    raise

    def _run(self, command):
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--"] + command
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}")

    def url(self, database="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name):
        self.psql("postgres", f"CREATE DATABASE {name}")
        return self.url(name)

    def psql(self, database, sql):
        result = subprocess.run([pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
                                 "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"psql failed: {result.stdout}")
        return result.stdout.strip()

    def stop(self):
        if getattr(self, "stopped", True):
            return
        self.stopped = True
        try:
            self._run([pg_bin("pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"])
        except RuntimeError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)


def built_binary(name, variable):
    """`$variable` if set, else the release and then the debug build of product `name`."""
    path = os.environ.get(variable)
    if path:
        return path
    for build in ("release", "debug"):
        candidate = os.path.join(REPO, ".build", build, name)
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError(f"no {name} binary: set {variable} or build the package (swift build -c release --product {name})")


def parley_binary():
    return built_binary("parley", "PARLEY_BIN")


def read_port_file(path):
    """The ports `--port-file` names: `--port`'s on the first line, the TLS listener's on a line
    `tls <port>` (only with `--tls-port`; None otherwise)."""
    with open(path) as f:
        lines = f.read().splitlines()
    tls = [int(line.split()[1]) for line in lines[1:] if line.startswith("tls ")]
    return int(lines[0]), (tls[0] if tls else None)


class ParleyServer:
    """`parley serve` against `database_url`: the first start binds port 0 and reads the port it got
    from `--port-file` (and `tls_port`, the `tls` line, with `--tls-port`); a restart binds that port
    again (clients keep their URLs)."""

    def __init__(self, database_url, extra=(), threads=2):
        self.database_url = database_url
        self.extra = list(extra)
        self.threads = threads
        self.port = None
        self.tls_port = None
        self.log_path = tempfile.mktemp(prefix="parley-rt-", suffix=".log")
        self.port_file = self.log_path[:-4] + ".port"
        self.process = None
        atexit.register(self.stop)

    @property
    def ws_url(self):
        return f"ws://127.0.0.1:{self.port}/v1/socket"

    @property
    def http_url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        command = [parley_binary(), "serve", "--host", "127.0.0.1", "--port", str(self.port or 0), "--port-file", self.port_file,
                   "--threads", str(self.threads), "--database-url", self.database_url,
                   "--migrations-dir", os.path.join(REPO, "migrations"), "--log-level", "warning"] + self.extra
        self.log_file = open(self.log_path, "a")
        self.process = subprocess.Popen(command, stdout=self.log_file, stderr=subprocess.STDOUT, preexec_fn=raise_nofile)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"parley exited with {self.process.returncode}:\n{self.log()}")
            if not os.path.exists(self.port_file):
                time.sleep(0.02)
                continue
            bound, self.tls_port = read_port_file(self.port_file)
            if self.port is None:
                self.port = bound
            elif bound != self.port:
                raise RuntimeError(f"parley restarted on port {bound}, not {self.port}")
            try:
                with urllib.request.urlopen(self.http_url + "/ready", timeout=1) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"parley did not become ready:\n{self.log()}")

    def kill(self, sig=signal.SIGKILL):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

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

    def rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError(f"/proc/{self.process.pid}/status has no VmRSS: memory cannot be measured")

    def metric(self, name):
        with urllib.request.urlopen(self.http_url + "/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    return float(line.rsplit(" ", 1)[1])
        return None

    def request(self, method, path, body=None, token=None, bearer=True):
        headers = {"Content-Type": "application/json"}
        if token:
            if bearer:
                headers["Authorization"] = "Bearer " + token
            else:
                headers["X-Parse-Session-Token"] = token
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.http_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def user_id(prefix, index):
    """A 10-character alphanumeric id, like Parse objectIds."""
    text = f"{prefix}{index}"
    return text + "0" * (10 - len(text)) if len(text) < 10 else text[:10]


def create_users(postgres, database, prefix, count):
    """Creates `count` users with one session each; returns [(userId, sessionToken)]."""
    assert len(prefix) <= 3
    postgres.psql(database, f"""
        INSERT INTO users (object_id, username)
        SELECT '{prefix}' || lpad(i::text, {10 - len(prefix)}, '0'), '{prefix}user' || i FROM generate_series(1, {count}) i;
        INSERT INTO sessions (object_id, token, user_id, expires_at)
        SELECT 's{prefix}' || lpad(i::text, {9 - len(prefix)}, '0'), 'r:' || md5('{prefix}' || i), '{prefix}' || lpad(i::text, {10 - len(prefix)}, '0'),
               now() + interval '1 day'
          FROM generate_series(1, {count}) i;
    """)
    rows = postgres.psql(database, f"SELECT user_id, token FROM sessions WHERE object_id LIKE 's{prefix}%' ORDER BY object_id")
    return [tuple(line.split("|")) for line in rows.splitlines()]


class Client:
    """A realtime client on one WebSocket: hello, requests with ids, events in a queue."""

    def __init__(self, ws, hello_reply):
        self.ws = ws
        self.welcome = hello_reply
        self.next_id = 0
        self.replies = {}
        self.events = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())
        self.closed = asyncio.get_running_loop().create_future()

    @classmethod
    async def connect(cls, url, token, device, resume_after=0, **kwargs):
        import websockets
        ws = await websockets.connect(url, ping_interval=None, max_size=2 ** 20, **kwargs)
        await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device, "resumeAfter": resume_after}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if reply.get("type") != "welcome":
            await ws.close()
            raise RuntimeError(f"hello refused: {reply}")
        return cls(ws, reply)

    async def _read(self):
        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame.get("type") in ("ok", "error") and frame.get("re") in self.replies:
                    self.replies.pop(frame["re"]).set_result(frame)
                else:
                    await self.events.put(frame)
        except Exception as error:  # noqa: BLE001 - reported through `closed`
            if not self.closed.done():
                self.closed.set_result(error)
            return
        if not self.closed.done():
            self.closed.set_result(None)

    async def request(self, frame, timeout=30):
        self.next_id += 1
        frame = dict(frame, id=self.next_id)
        future = asyncio.get_running_loop().create_future()
        self.replies[self.next_id] = future
        await self.ws.send(json.dumps(frame))
        return await asyncio.wait_for(future, timeout)

    async def send_message(self, to, text, client_id=None, headers=None):
        frame = {"type": "message.send", "clientMessageId": client_id or os.urandom(16).hex(), "to": to, "text": text}
        if headers is not None:
            frame["headers"] = headers
        return await self.request(frame)

    async def next_event(self, kind=None, timeout=10):
        """The next event of type `kind` (others are dropped); fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        skipped = []
        while True:
            try:
                event = await asyncio.wait_for(self.events.get(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise AssertionError(f"{self.welcome.get('deviceId')}: no {kind or 'event'} within {timeout} s; "
                                     f"skipped {skipped[-5:]}") from None
            if kind is None or event.get("type") == kind:
                return event
            skipped.append(event)

    async def expect_no_event(self, seconds=0.5):
        try:
            event = await asyncio.wait_for(self.events.get(), seconds)
        except asyncio.TimeoutError:
            return
        raise AssertionError(f"unexpected event {event}")

    async def ack(self, up_to):
        await self.ws.send(json.dumps({"type": "ack", "upTo": up_to}))

    async def close(self):
        await self.ws.close()
        self.reader.cancel()


def check(condition, message):
    if not condition:
        raise AssertionError(message)


async def run_on_nodes(scenario, database, nodes=1, extra=()):
    """Starts a PostgreSQL cluster, creates `database` and starts `nodes` servers on it, then
    awaits `scenario(postgres, *servers)`; prints every server's log if it fails; stops all."""
    postgres = TempPostgres()
    servers = []
    try:
        url = postgres.create_database(database)
        for _ in range(nodes):
            servers.append(ParleyServer(url, extra=list(extra)).start())
        try:
            await scenario(postgres, *servers)
        except BaseException:
            for index, server in enumerate(servers):
                log(f"--- node {chr(ord('A') + index)} log\n" + server.log())
            raise
    finally:
        for server in servers:
            server.stop()
        postgres.stop()


def run(main):
    """Runs an async test entry point; prints the server log on failure."""
    try:
        asyncio.run(main())
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
