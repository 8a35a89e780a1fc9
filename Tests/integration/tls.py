#!/usr/bin/env python3
"""HTTPS and WSS served by Parley itself (issue 16), against a CA this test makes with openssl.

One server with two certificates (a.parley.test, b.parley.test) on a TLS port beside the plain
one, then: Python's ssl, curl and the websockets client over HTTPS/WSS (signup, /users/me, a
realtime hello and message); SNI picks the certificate, unknown names get the first; ALPN
http/1.1; TLS 1.2 and 1.3 only; session resumption by ticket; SIGHUP reloads a renewed
certificate while a kept-alive connection stays open and serving (a broken file keeps the old
ones); a slow handshake is cut by the deadline while others are served; plain HTTP on the TLS
port gets no answer; 1,000 concurrent TLS connections each make two requests (RSS per idle TLS
connection printed); testssl.sh finds nothing HIGH or CRITICAL and sees TLS 1.2/1.3 only; a
server with TLS on --port itself."""
import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import (REPO, Client, ParleyServer, TempPostgres, check, create_users, log, read_port_file,  # noqa: E402
                              parley_binary, raise_nofile, tools_required)

NAMES = ("a.parley.test", "b.parley.test")
CONNECTIONS = int(os.environ.get("PARLEY_TLS_CONNECTIONS", "1000"))


class TestCA:
    """A throwaway CA in a temporary directory; leaves are EC P-256 with one DNS name."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="parley-tls-ca-")
        self.ca = self.path("ca.pem")
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "ca.key", "-out", "ca.pem", "-days", "365", "-subj", "/CN=Parley Integration CA")

    def path(self, name):
        return os.path.join(self.directory, name)

    def openssl(self, *arguments):
        subprocess.run(["openssl", *arguments], cwd=self.directory, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def issue(self, name, base=None):
        """Issues (or re-issues, with a new key) `base`.pem/.key for `name`; returns their paths."""
        base = base or name
        with open(self.path(base + ".ext"), "w") as ext:
            # 90 days and a CRL location, as a public CA's leaf has: testssl.sh rates a shorter
            # life or no revocation info HIGH (properties of the certificate, not of the server).
            ext.write(f"subjectAltName=DNS:{name}\ncrlDistributionPoints=URI:http://crl.parley.test/ca.crl\n")
        self.openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", base + ".key.new", "-out", base + ".csr", "-subj", f"/CN={name}")
        self.openssl("x509", "-req", "-in", base + ".csr", "-out", base + ".pem.new", "-extfile", base + ".ext",
                     "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "90")
        os.replace(self.path(base + ".key.new"), self.path(base + ".key"))
        os.replace(self.path(base + ".pem.new"), self.path(base + ".pem"))
        return self.path(base + ".pem"), self.path(base + ".key")

    def close(self):
        shutil.rmtree(self.directory, ignore_errors=True)


def client_context(ca, minimum=None, maximum=None):
    context = ssl.create_default_context(cafile=ca)
    if minimum:
        context.minimum_version = minimum
    if maximum:
        context.maximum_version = maximum
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


class TLSClient:
    """One blocking TLS connection speaking HTTP/1.1 keep-alive (Content-Length framing)."""

    def __init__(self, port, name, context, session=None, timeout=10):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = context.wrap_socket(raw, server_hostname=name, session=session)
        self.buffer = b""

    @property
    def certificate_name(self):
        subject = dict(entry[0] for entry in self.sock.getpeercert()["subject"])
        return subject["commonName"]

    @property
    def fingerprint(self):
        import hashlib
        return hashlib.sha256(self.sock.getpeercert(binary_form=True)).hexdigest()

    def request(self, method, path, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        lines = [f"{method} {path} HTTP/1.1", "Host: a.parley.test", f"Content-Length: {len(data)}"]
        lines += [f"{key}: {value}" for key, value in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(self.buffer) < length:
            self._fill()
        payload, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, payload

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.buffer += chunk

    def close(self):
        self.sock.close()


def wait_for_log(server, text, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in server.log():
            return
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in the log:\n{server.log()}")


def check_protocols_sni_alpn(ca, port):
    for name in NAMES:
        client = TLSClient(port, name, client_context(ca))
        check(client.certificate_name == name, f"SNI {name} got the certificate of {client.certificate_name}")
        check(client.sock.version() == "TLSv1.3", client.sock.version())
        check(client.sock.selected_alpn_protocol() == "http/1.1", client.sock.selected_alpn_protocol())
        status, body = client.request("GET", "/health")
        check(status == 200, f"/health over TLS: {status} {body}")
        client.close()
    loose = client_context(ca)
    loose.check_hostname = False
    client = TLSClient(port, "unknown.parley.test", loose)
    check(client.certificate_name == NAMES[0], f"an unknown name gets the first certificate, got {client.certificate_name}")
    client.close()
    tls12 = TLSClient(port, NAMES[1], client_context(ca, maximum=ssl.TLSVersion.TLSv1_2))
    check(tls12.sock.version() == "TLSv1.2", tls12.sock.version())
    cipher = tls12.sock.cipher()[0]
    check(cipher.startswith("ECDHE-") and ("GCM" in cipher or "CHACHA20" in cipher), f"TLS 1.2 cipher {cipher}")
    check(tls12.request("GET", "/health")[0] == 200, "TLS 1.2 request")
    tls12.close()
    warnings.simplefilter("ignore", DeprecationWarning)
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    try:
        old.set_ciphers("ALL:@SECLEVEL=0")
        TLSClient(port, NAMES[0], old).close()
        raise AssertionError("a TLS 1.1 handshake succeeded")
    except ssl.SSLError:
        pass
    log("SNI, ALPN, TLS 1.2/1.3 only: ok")


def check_resumption(ca, port):
    for maximum in (None, ssl.TLSVersion.TLSv1_2):
        context = client_context(ca, maximum=maximum)
        first = TLSClient(port, NAMES[0], context)
        first.request("GET", "/health")  # TLS 1.3 tickets arrive after the handshake
        session = first.sock.session
        first.close()
        second = TLSClient(port, NAMES[0], context, session=session)
        check(second.sock.session_reused, f"session not resumed ({second.sock.version()})")
        check(second.request("GET", "/health")[0] == 200, "resumed request")
        second.close()
    log("session resumption by ticket (TLS 1.2 and 1.3): ok")


def check_parse_and_curl(ca, server, tls_port):
    client = TLSClient(tls_port, NAMES[0], client_context(ca))
    headers = {"X-Parse-Application-Id": "parley", "Content-Type": "application/json"}
    status, body = client.request("POST", "/parse/users", {"username": "tls-user", "password": "secret-pw"}, headers)
    check(status == 201, f"signup over TLS: {status} {body}")
    token = json.loads(body)["sessionToken"]
    status, body = client.request("GET", "/parse/users/me", headers=dict(headers, **{"X-Parse-Session-Token": token}))
    check(status == 200 and json.loads(body)["username"] == "tls-user", f"/users/me over TLS: {status} {body}")
    status, body = client.request("GET", "/parse/classes/Nope/x", headers=headers)
    plain = urllib.request.Request(server.http_url + "/parse/classes/Nope/x", headers=headers)
    try:
        urllib.request.urlopen(plain, timeout=10)
        plain_status, plain_body = 200, b""
    except urllib.error.HTTPError as error:
        plain_status, plain_body = error.code, error.read()
    check((status, json.loads(body)) == (plain_status, json.loads(plain_body)), f"TLS {status} {body} vs plain {plain_status} {plain_body}")
    client.close()
    curl = subprocess.run(["curl", "-sS", "--cacert", ca, "--resolve", f"{NAMES[1]}:{tls_port}:127.0.0.1", "-w", "\n%{http_version} %{http_code}",
                           "-H", "X-Parse-Application-Id: parley", "-H", f"X-Parse-Session-Token: {token}",
                           f"https://{NAMES[1]}:{tls_port}/parse/users/me"], capture_output=True, text=True, timeout=30)
    check(curl.returncode == 0, f"curl failed: {curl.stderr}")
    body, _, trailer = curl.stdout.rpartition("\n")
    check(trailer == "1.1 200" and json.loads(body)["username"] == "tls-user", f"curl: {curl.stdout}")
    refused = subprocess.run(["curl", "-sS", "--resolve", f"{NAMES[1]}:{tls_port}:127.0.0.1", f"https://{NAMES[1]}:{tls_port}/health"],
                             capture_output=True, text=True, timeout=30)
    check(refused.returncode != 0, "curl without the test CA must refuse the certificate")
    log("Parse API over HTTPS (Python ssl, curl): ok")


async def check_websocket(ca, postgres, tls_port):
    users = create_users(postgres, "parley_tls", "tl", 2)
    url = f"wss://127.0.0.1:{tls_port}/v1/socket"
    context = client_context(ca)
    context.set_alpn_protocols(["http/1.1"])
    alice = await Client.connect(url, users[0][1], "alice-phone", ssl=context, server_hostname=NAMES[0])
    bob = await Client.connect(url, users[1][1], "bob-phone", ssl=context, server_hostname=NAMES[1])
    reply = await alice.send_message([users[1][0]], "over wss " + "x" * 20000)
    check(reply.get("type") == "ok", f"message.send over WSS: {reply}")
    event = await bob.next_event("message")
    check(event["text"].startswith("over wss") and len(event["text"]) == 20009, f"message over WSS: {str(event)[:200]}")
    await alice.close()
    await bob.close()
    log("websockets over WSS (hello, 20 kB message): ok")


def check_reload(ca, server, tls_port):
    context = client_context(ca.ca)
    kept = TLSClient(tls_port, NAMES[0], context)
    before = kept.fingerprint
    check(kept.request("GET", "/health")[0] == 200, "kept-alive request before the reload")
    ca.issue(NAMES[0])  # same files, new key and certificate
    server.process.send_signal(signal.SIGHUP)
    wait_for_log(server, "TLS certificates reloaded")
    fresh = TLSClient(tls_port, NAMES[0], context)
    check(fresh.fingerprint != before, "a new connection after SIGHUP gets the new certificate")
    check(kept.request("GET", "/health")[0] == 200, "the connection open across the reload still serves")
    check(kept.fingerprint == before, "the open connection keeps its certificate")
    fresh.close()
    renewed = TLSClient(tls_port, NAMES[0], context).fingerprint
    with open(ca.path(NAMES[0] + ".pem"), "w") as broken:
        broken.write("not a certificate\n")
    server.process.send_signal(signal.SIGHUP)
    wait_for_log(server, "TLS certificates not reloaded")
    after = TLSClient(tls_port, NAMES[0], context)
    check(after.fingerprint == renewed, "a broken file keeps the certificates in use")
    check(kept.request("GET", "/health")[0] == 200, "still serving")
    after.close()
    kept.close()
    ca.issue(NAMES[0])
    log("SIGHUP reload with a connection open, broken file refused: ok")


def check_deadline_and_garbage(ca, tls_port):
    slow = socket.create_connection(("127.0.0.1", tls_port), timeout=10)
    slow.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]))  # the start of a ClientHello, then nothing
    started = time.time()
    # Others are served meanwhile.
    other = TLSClient(tls_port, NAMES[0], client_context(ca))
    check(other.request("GET", "/health")[0] == 200, "served during a slow handshake")
    other.close()
    check(slow.recv(100) == b"", "the slow handshake is closed")
    elapsed = time.time() - started
    check(4.5 < elapsed < 8, f"cut after {elapsed:.1f}s with a 5s deadline")
    slow.close()
    garbage = socket.create_connection(("127.0.0.1", tls_port), timeout=10)
    garbage.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    received = b""
    while True:
        chunk = garbage.recv(4096)
        if not chunk:
            break
        received += chunk
    check(b"HTTP/1.1" not in received, f"plain HTTP on the TLS port answered: {received[:100]}")
    garbage.close()
    log(f"slow handshake cut after {elapsed:.1f}s; plain HTTP on the TLS port refused: ok")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no VmRSS: memory cannot be measured")


async def check_many_connections(ca, server, tls_port):
    context = client_context(ca)
    context.set_alpn_protocols(["http/1.1"])
    request = b"GET /health HTTP/1.1\r\nHost: a.parley.test\r\n\r\n"

    async def get(reader, writer):
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        return head.startswith(b"HTTP/1.1 200")

    async def open_one(index):
        for attempt in range(3):
            try:
                return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", tls_port, ssl=context,
                                                                      server_hostname=NAMES[index % 2]), 60)
            except (ConnectionError, asyncio.TimeoutError, ssl.SSLError):
                if attempt == 2:
                    raise
                await asyncio.sleep(0.2)

    baseline = rss_kib(server.process.pid)
    started = time.time()
    connections = []
    for batch in range(0, CONNECTIONS, 100):
        connections += await asyncio.gather(*(open_one(i) for i in range(batch, min(CONNECTIONS, batch + 100))))
    handshakes = time.time() - started
    first = await asyncio.gather(*(get(r, w) for r, w in connections))
    check(all(first), f"{first.count(False)} of {CONNECTIONS} first requests failed")
    await asyncio.sleep(0.5)
    loaded = rss_kib(server.process.pid)
    second = await asyncio.gather(*(get(r, w) for r, w in connections))
    check(all(second), f"{second.count(False)} of {CONNECTIONS} second requests failed")
    for _, writer in connections:
        writer.close()
    log(f"{CONNECTIONS} concurrent TLS connections, two requests each: ok "
        f"(handshakes {handshakes:.1f}s from Python; RSS +{(loaded - baseline) / CONNECTIONS:.1f} KiB per idle TLS connection)")


def check_testssl(ca, tls_port):
    binary = shutil.which("testssl") or shutil.which("testssl.sh")
    if not binary:
        if tools_required():
            raise AssertionError("testssl.sh is not installed (scripts/setup.sh installs it)")
        log("testssl.sh not installed: skipped (scripts/setup.sh installs it)")
        return

    def run_testssl(*checks):
        report = tempfile.mktemp(prefix="parley-testssl-", suffix=".json")
        result = subprocess.run([binary, "--quiet", "--warnings", "off", "--color", "0", "--ip", "127.0.0.1", *checks,
                                 "--add-ca", ca, "--jsonfile", report, f"{NAMES[0]}:{tls_port}"],
                                capture_output=True, text=True, timeout=900, input="")
        with open(report) as f:
            findings = json.load(f)
        os.unlink(report)
        return result, findings

    def protocols(findings):
        return {f["id"]: f["finding"] for f in findings if f["id"] in ("SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3")}

    started = time.time()
    # Protocols, cipher categories, forward secrecy, server preferences, server defaults
    # (certificate, tickets) and vulnerabilities; not HTTP headers or client simulation (slow).
    result, findings = run_testssl("-p", "-s", "-f", "-P", "-S", "-U")
    bad = [f for f in findings if f.get("severity") in ("HIGH", "CRITICAL")]
    check(not bad, "testssl.sh HIGH/CRITICAL findings:\n" + "\n".join(f"{f['id']}: {f['finding']}" for f in bad))
    offered = protocols(findings)
    retried = False
    if not all(offered.get(p, "").startswith("offered") for p in ("TLS1_2", "TLS1_3")):
        # On a loaded machine testssl.sh's bash socket probes sometimes give up on a protocol
        # the server does offer (TLS 1.2 is also checked with Python above): probe once more.
        retried = True
        offered = protocols(run_testssl("-p")[1])
    for protocol in ("SSLv2", "SSLv3", "TLS1", "TLS1_1"):
        check(offered.get(protocol, "").startswith("not offered"), f"{protocol}: {offered.get(protocol)}")
    for protocol in ("TLS1_2", "TLS1_3"):
        check(offered.get(protocol, "").startswith("offered"), f"{protocol}: {offered.get(protocol)}")
    medium = sorted({f["id"] for f in findings if f.get("severity") == "MEDIUM"})
    log(f"testssl.sh ({time.time() - started:.0f}s, exit {result.returncode}{', protocols probed twice' if retried else ''}): "
        f"no HIGH/CRITICAL, TLS 1.2/1.3 only; MEDIUM: {medium or 'none'}")


async def scenario(ca, postgres, server, tls_port):
    check_protocols_sni_alpn(ca.ca, tls_port)
    check_resumption(ca.ca, tls_port)
    check_parse_and_curl(ca.ca, server, tls_port)
    await check_websocket(ca.ca, postgres, tls_port)
    check_reload(ca, server, tls_port)
    check_deadline_and_garbage(ca.ca, tls_port)
    await check_many_connections(ca.ca, server, tls_port)
    check_testssl(ca.ca, tls_port)


def check_tls_on_main_port(ca, url):
    """--tls-cert without --tls-port: --port itself speaks TLS (and plain HTTP gets nothing)."""
    cert, key = ca.path(NAMES[0] + ".pem"), ca.path(NAMES[0] + ".key")
    log_path = tempfile.mktemp(prefix="parley-tls-main-", suffix=".log")
    port_file = log_path[:-4] + ".port"
    port = None
    with open(log_path, "a") as log_file:
        # Port 0: the port bound is read back from --port-file.
        process = subprocess.Popen([parley_binary(), "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", port_file, "--threads", "1",
                                    "--database-url", url, "--migrations-dir", os.path.join(REPO, "migrations"),
                                    "--tls-cert", cert, "--tls-key", key], stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                if port is None:
                    port, tls_line = read_port_file(port_file)
                    check(tls_line is None, f"no `tls` line when TLS shares --port: {tls_line}")
                client = TLSClient(port, NAMES[0], client_context(ca.ca), timeout=2)
                status, _ = client.request("GET", "/ready")
                client.close()
                if status == 200:
                    break
            except (OSError, ConnectionError, ValueError):
                pass
            check(process.poll() is None and time.time() < deadline, "the TLS-only server did not become ready:\n" + open(log_path).read())
            time.sleep(0.1)
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
            raise AssertionError("plain HTTP answered on a TLS-only port")
        except (urllib.error.URLError, ConnectionError, OSError) as error:
            check(not isinstance(error, urllib.error.HTTPError), f"plain HTTP got an HTTP answer: {error}")
        log("TLS on --port itself (no --tls-port): ok")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        os.unlink(log_path)
        if os.path.exists(port_file):
            os.unlink(port_file)


def main():
    raise_nofile()
    ca = TestCA()
    for name in NAMES:
        ca.issue(name)
    postgres = TempPostgres()
    server = None
    try:
        url = postgres.create_database("parley_tls")
        certs = ",".join(ca.path(name + ".pem") for name in NAMES)
        keys = ",".join(ca.path(name + ".key") for name in NAMES)
        server = ParleyServer(url, extra=["--tls-cert", certs, "--tls-key", keys, "--tls-port", "0",
                                          "--tls-handshake-timeout", "5s", "--log-level", "notice"]).start()
        # --tls-port 0: the TLS listener's port is the port file's `tls` line, read back by ParleyServer.
        tls_port = server.tls_port
        check(tls_port is not None and tls_port != server.port, f"the port file names a TLS port of its own: {tls_port}")
        try:
            asyncio.run(scenario(ca, postgres, server, tls_port))
        except BaseException:
            log("--- server log\n" + server.log())
            raise
        server.stop()
        check_tls_on_main_port(ca, url)
    finally:
        if server:
            server.stop()
        postgres.stop()
        ca.close()
    log("tls: all checks passed")


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
