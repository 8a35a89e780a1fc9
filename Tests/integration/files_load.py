#!/usr/bin/env python3
"""Files on disk storage under load and abuse, against a real `parley serve`.

- 100 concurrent uploads of 5 MB files, then 100 concurrent downloads of them (sendfile), every
  byte checked; the server's peak RSS (VmHWM from /proc/<pid>/status) must stay under
  PEAK_RSS_LIMIT_MIB (docs/files.md), since uploads are streamed to disk under back-pressure
  and downloads never pass through user-space buffers.
- Abuse: a flood of uploads without a session (refused with 130, quickly), a Content-Length past
  the limit (413 before the body), a body shorter than its Content-Length (the client goes
  away: nothing stored, no temporary file left), a body longer than its Content-Length (the
  extra bytes are a malformed next request), a name with a path in it; the server keeps serving.
- A File field through the Python Parse client (qs-parse-rest): uploaded with the user's session,
  saved on an object as the client's `File`, queried with `$exists`, fetched and its URL downloaded.
"""
import hashlib
import http.client
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import files_support as fs  # noqa: E402

FILE_BYTES = 5 * 1000 * 1000
CONCURRENCY = 100
# Peak RSS of the whole server process (embedded PostgreSQL runs in its own processes).
PEAK_RSS_LIMIT_MIB = int(os.environ.get("PARLEY_FILES_RSS_LIMIT_MIB", "192"))


def main():
    parley = fs.Parley()
    try:
        load(parley)
        abuse(parley)
        parse_client(parley)
        print(f"{fs.CHECKS} checks passed")
    except SystemExit:
        parley.dump()
        raise
    finally:
        parley.stop()


def run_all(count, work):
    results = [None] * count
    errors = []

    def one(index):
        try:
            results[index] = work(index)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(f"{index}: {error!r}")
    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        fs.check("no transfer failed", errors[:3], [])
    return results


def load(parley):
    payload = os.urandom(FILE_BYTES)
    digest = hashlib.sha256(payload).hexdigest()
    before = parley.vm_hwm_kib()
    started = time.time()

    def upload(index):
        connection = http.client.HTTPConnection("127.0.0.1", parley.port, timeout=300)
        connection.putrequest("POST", f"/parse/files/photo{index}.jpg")
        for name, value in (("X-Parse-Application-Id", fs.APP_ID), ("X-Parse-Master-Key", fs.MASTER_KEY),
                            ("Content-Type", "image/jpeg"), ("Content-Length", str(FILE_BYTES))):
            connection.putheader(name, value)
        connection.endheaders()
        view = memoryview(payload)
        for offset in range(0, FILE_BYTES, 64 * 1024):
            connection.send(view[offset:offset + 64 * 1024])
        response = connection.getresponse()
        body = response.read()
        connection.close()
        if response.status != 201:
            raise RuntimeError(f"upload {response.status} {body[:200]!r}")
        import json
        return json.loads(body)["url"]
    urls = run_all(CONCURRENCY, upload)
    upload_seconds = time.time() - started
    fs.check(f"{CONCURRENCY} concurrent 5 MB uploads stored", len([u for u in urls if u]), CONCURRENCY)
    stored = [n for n in os.listdir(os.path.join(parley.data_dir, "files")) if not n.startswith(".")]
    fs.check("100 files on disk, each 5 MB", sorted({os.path.getsize(os.path.join(parley.data_dir, "files", n)) for n in stored}), [FILE_BYTES])
    after_uploads = parley.vm_hwm_kib()

    started = time.time()

    def download(index):
        connection = http.client.HTTPConnection("127.0.0.1", parley.port, timeout=300)
        connection.request("GET", parley.file_path(urls[index]))
        response = connection.getresponse()
        hasher = hashlib.sha256()
        while True:
            chunk = response.read(256 * 1024)
            if not chunk:
                break
            hasher.update(chunk)
        connection.close()
        return (response.status, hasher.hexdigest())
    results = run_all(CONCURRENCY, download)
    download_seconds = time.time() - started
    fs.check(f"{CONCURRENCY} concurrent 5 MB downloads, every byte", set(results), {(200, digest)})
    peak = parley.vm_hwm_kib()
    print(f"info  VmHWM: {before // 1024} MiB at start, {after_uploads // 1024} MiB after uploads ({upload_seconds:.1f} s), "
          f"{peak // 1024} MiB after downloads ({download_seconds:.1f} s); limit {PEAK_RSS_LIMIT_MIB} MiB", flush=True)
    fs.check(f"peak RSS under {PEAK_RSS_LIMIT_MIB} MiB for 100 x 5 MB each way", peak // 1024 < PEAK_RSS_LIMIT_MIB, True)


def raw(parley, data, read=True):
    with socket.create_connection(("127.0.0.1", parley.port), timeout=30) as sock:
        sock.sendall(data)
        if not read:
            return b""
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except socket.timeout:
            pass
        return b"".join(chunks)


def abuse(parley):
    files_dir = os.path.join(parley.data_dir, "files")
    before = set(os.listdir(files_dir))

    # A flood without a session: every one refused with Parse's error, none stored.
    def anonymous(index):
        return parley.upload(f"flood{index}.txt", b"x" * 1024, master=False)
    started = time.time()
    answers = run_all(200, anonymous)
    fs.check("200 uploads without a session are all 400/130",
             {(status, body.get("code"), body.get("error")) for status, body in answers}, {(400, 130, "File upload by public is disabled.")})
    fs.check("refused within 30 s", time.time() - started < 30, True)

    # Past the limit by Content-Length: 413 before the body is read.
    head = (f"POST /parse/files/big.bin HTTP/1.1\r\nHost: x\r\nX-Parse-Application-Id: {fs.APP_ID}\r\nX-Parse-Master-Key: {fs.MASTER_KEY}\r\n"
            f"Content-Type: application/octet-stream\r\nContent-Length: {21 * 1024 * 1024}\r\n\r\n").encode()
    answer = raw(parley, head)
    fs.check("a Content-Length of 21 MiB is 413 with Parse's body", (answer.split(b"\r\n")[0], answer.endswith(b'{"error":"request entity too large"}')),
             (b"HTTP/1.1 413 Content Too Large", True))

    # Shorter than its Content-Length: the client goes away mid-body; nothing is stored.
    head = head.replace(str(21 * 1024 * 1024).encode(), b"1000000")
    raw(parley, head + b"y" * 100000, read=False)
    time.sleep(1)
    fs.wait_until("the cut upload's cleanup", lambda: set(os.listdir(files_dir)) == before, timeout=20)
    fs.check("a cut upload leaves no file and no temporary file", set(os.listdir(files_dir)) - before, set())

    # Longer than its Content-Length: the file is the declared bytes; the rest is not part of it
    # (a malformed next request, answered 400 or with the connection closing).
    head = head.replace(b"1000000", b"10")
    answer = raw(parley, head + b"0123456789" + b"GARBAGE GARBAGE\r\n\r\n")
    fs.check("a body longer than its Content-Length: the declared bytes are stored", answer.startswith(b"HTTP/1.1 201"), True)
    import json
    first = answer.split(b"\r\n\r\n", 1)[1]
    url = json.loads(first[:first.index(b"}") + 1])["url"]
    status, _, body = parley.request("GET", parley.file_path(url))
    fs.check("and only they", (status, body), (200, b"0123456789"))
    fs.check("the rest is no second upload", answer.count(b"HTTP/1.1 201"), 1)

    # Downloads cut by the client (reset while the kernel sends the file): a write to a closed
    # socket must fail that connection only (sendfile raises SIGPIPE; a server not ignoring it dies).
    import struct
    status, body = parley.upload("cut.bin", b"z" * (5 * 1024 * 1024))
    cut_url = body["url"]
    request = f"GET {parley.file_path(cut_url)} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", parley.port), timeout=10)
        sock.sendall(request)
        sock.recv(1024)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    time.sleep(0.5)  # kept: a window for the server to hit the closed sockets (it must survive)
    fs.check("20 downloads reset mid-file leave the server running", parley.process.poll(), None)
    status, _, got = parley.request("GET", parley.file_path(cut_url))
    fs.check("and it still serves the file whole", (status, len(got)), (200, 5 * 1024 * 1024))

    # Names that try to leave the directory.
    status, body = parley.upload("..%2F..%2Fetc%2Fpasswd", b"nope")
    fs.check("a name with a path in it is 122", (status, body.get("code")), (400, 122))
    status, _, _ = parley.request("GET", f"/parse/files/{fs.APP_ID}/..%2F..%2Fpostgres%2Fdata%2Fpg_hba.conf")
    fs.check("a download outside the directory is 404", status, 404)
    status, _, _ = parley.request("GET", "/health")
    fs.check("the server keeps serving", status, 200)


def parse_client(parley):
    os.environ["PARSE_API_ROOT"] = f"http://127.0.0.1:{parley.port}/parse"
    from parse_rest.connection import SessionToken, register
    from parse_rest.datatypes import File, Object
    from parse_rest.user import User
    register(fs.APP_ID, fs.REST_KEY)
    user = User.signup("photographer", "secret-pass", email="photographer@example.com")
    with SessionToken(user.sessionToken):
        # The client's File.save builds its Request from a bytes URL, which urllib refuses on
        # Python 3 ("unknown url type"): the bytes go up with plain HTTP under the user's session,
        # and the client carries the File value from there on.
        status, answer = parley.upload("avatar.png", os.urandom(2048) + b"png", content_type="image/png", master=False,
                                       headers={"X-Parse-Session-Token": user.sessionToken})
        fs.check("a user with a session uploads", (status, answer["name"].endswith("_avatar.png")), (201, True))
        photo = File(answer["name"], url=answer["url"], mimetype="image/png")

        class Profile(Object):
            pass
        Profile(screenName="ann", photo=photo).save()
        Profile(screenName="bob").save()
        with_photo = Profile.Query.filter(photo__exists=True)
        fs.check("$exists finds the object with a File", [p.screenName for p in with_photo], ["ann"])
        without = Profile.Query.filter(photo__exists=False)
        fs.check("and not the one without", [p.screenName for p in without], ["bob"])
        fetched = Profile.Query.get(screenName="ann")
        fs.check("the File comes back as a File", (type(fetched.photo).__name__, fetched.photo.name), ("File", photo.name))
        status, headers, body = parley.request("GET", parley.file_path(fetched.photo.url))
        fs.check("its URL serves the bytes", (status, headers.get("content-type"), len(body)), (200, "image/png", 2051))


if __name__ == "__main__":
    main()
