#!/usr/bin/env python3
"""The proximity app's flow through an outside Parse client (qs-parse-rest, import name
`parse_rest`) against a real `parley serve` with an embedded PostgreSQL.

Starts $PARLEY_BIN (default .build/release/parley, else .build/debug/parley) on a free port with
a temporary --data-dir, points PARSE_API_ROOT at it, then: signup with screenName and age, login,
current_user, a query username == X, saving a GeoPoint, a nearby query ($nearSphere sent by the
client), count, batch; plus the REST `$maxDistanceInKilometers` form with plain urllib.
Prints every check; exits non-zero on the first mismatch.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APP_ID = "proximity-app"
REST_KEY = "rest-key"
MASTER_KEY = "master-key"


def binary():
    candidates = [os.environ.get("PARLEY_BIN"), os.path.join(ROOT, ".build/release/parley"), os.path.join(ROOT, ".build/debug/parley")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    sys.exit("parse_client: no parley binary (set PARLEY_BIN or build first)")


CHECKS = 0


def check(label, actual, expected):
    global CHECKS
    if actual != expected:
        print(f"FAIL  {label}: expected {expected!r}, got {actual!r}")
        raise SystemExit(1)
    CHECKS += 1
    print(f"ok    {label}")


def main():
    data_dir = tempfile.mkdtemp(prefix="parley-parse-client-")
    os.chmod(data_dir, 0o755)  # the embedded PostgreSQL runs as `postgres` when we are root
    port_file = os.path.join(data_dir, "port")
    log = open(os.path.join(data_dir, "serve.log"), "w")
    env = dict(os.environ, PARLEY_APP_ID=APP_ID, PARLEY_REST_API_KEY=REST_KEY, PARLEY_MASTER_KEY=MASTER_KEY,
               PARLEY_PASSWORD_OPS_LIMIT="1", PARLEY_PASSWORD_MEM_LIMIT="1048576",
               # The client creates its classes by saving objects, as with a Parse Server that allows it.
               PARLEY_ALLOW_CLIENT_CLASS_CREATION="true")
    server = subprocess.Popen([binary(), "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", port_file, "--data-dir", data_dir,
                               "--migrations-dir", os.path.join(ROOT, "migrations")],
                              stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        port = wait_ready(port_file, server)
        run_flow(port)
        print(f"{CHECKS} checks passed")
    except SystemExit:
        print(open(os.path.join(data_dir, "serve.log")).read()[-4000:])
        raise
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(data_dir, ignore_errors=True)


def wait_ready(port_file, server):
    """The port the server bound (port 0, read from its --port-file) once `/ready` answers 200."""
    deadline = time.time() + 120
    while time.time() < deadline:
        if server.poll() is not None:
            sys.exit(f"parse_client: parley serve exited with {server.returncode}")
        if not os.path.exists(port_file):
            time.sleep(0.05)
            continue
        with open(port_file) as f:
            port = int(f.readline())
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as response:
                if response.status == 200:
                    return port
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.2)
    sys.exit("parse_client: server not ready in 120 s")


def rest(port, method, path, params=None, body=None, token=None):
    """A plain-HTTP Parse request; returns (status, parsed JSON)."""
    url = f"http://127.0.0.1:{port}/parse{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("X-Parse-Application-Id", APP_ID)
    request.add_header("X-Parse-REST-API-Key", REST_KEY)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("X-Parse-Session-Token", token)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def run_flow(port):
    # parse_rest reads PARSE_API_ROOT when it is imported.
    os.environ["PARSE_API_ROOT"] = f"http://127.0.0.1:{port}/parse"
    from parse_rest.connection import ParseBatcher, SessionToken, register
    from parse_rest.core import ResourceRequestNotFound
    from parse_rest.datatypes import GeoPoint, Object
    from parse_rest.user import User

    register(APP_ID, REST_KEY)

    # Signup with custom profile fields.
    alice = User.signup("alice", "wonderland", screenName="Alice Liddell", age=27)
    check("signup returns a 10-character objectId", len(alice.objectId), 10)
    check("signup returns an r: session token", alice.sessionToken.startswith("r:") and len(alice.sessionToken) == 34, True)
    bob = User.signup("bob", "builder", screenName="Bob", age=35, email="bob@example.com")

    # Login and current user.
    logged_in = User.login("alice", "wonderland")
    check("login returns the same user", logged_in.objectId, alice.objectId)
    check("login returns custom fields", (logged_in.screenName, logged_in.age), ("Alice Liddell", 27))
    check("login never returns the password", hasattr(logged_in, "password"), False)
    try:
        User.login("alice", "wrong")
        check("wrong password is refused", "accepted", "ResourceRequestNotFound")
    except ResourceRequestNotFound as error:
        check("wrong password → 404 code 101", json.loads(error.args[0])["code"], 101)
    with SessionToken(logged_in.sessionToken):
        me = User.current_user()
    check("current_user is alice", me.username, "alice")

    # The incoming-call screen: the caller's real name by username.
    caller = User.Query.get(username="bob")
    check("query username == bob finds Bob's screenName", caller.screenName, "Bob")
    check("query results hide other users' email", hasattr(caller, "email"), False)
    with SessionToken(bob.sessionToken):
        check("bob's own query shows his email", User.Query.get(username="bob").email, "bob@example.com")

    # Save locations (GeoPoints) and look for people nearby.
    logged_in.location = GeoPoint(48.8584, 2.2945)  # Eiffel Tower
    logged_in.save()
    bob_session = User.login("bob", "builder")
    bob_session.location = GeoPoint(48.8606, 2.3376)  # Louvre, about 3.2 km away
    bob_session.save()
    carol = User.signup("carol", "pw", screenName="Carol", age=41)
    carol.location = GeoPoint(40.7484, -73.9857)  # New York
    carol.save()
    nearby = User.Query.filter(location__nearSphere=GeoPoint(48.8600, 2.3000)).limit(10)
    names = [user.username for user in nearby]
    check("nearby query ($nearSphere) orders by distance", names, ["alice", "bob", "carol"])
    check("GeoPoint round-trips", (round(nearby[0].location.latitude, 4), round(nearby[0].location.longitude, 4)), (48.8584, 2.2945))

    # Count.
    check("count of adults over 30", User.Query.filter(age__gte=30).count(), 2)

    # The REST form: within 10 km, with plain HTTP.
    where = {"location": {"$nearSphere": {"__type": "GeoPoint", "latitude": 48.8600, "longitude": 2.3000},
                          "$maxDistanceInKilometers": 10}}
    status, body = rest(port, "GET", "/users", {"where": json.dumps(where), "count": 1}, token=alice.sessionToken)
    check("REST $maxDistanceInKilometers status", status, 200)
    check("REST $maxDistanceInKilometers results", [user["username"] for user in body["results"]], ["alice", "bob"])
    check("REST count with the geo filter", body["count"], 2)

    # Batch: save two objects in one request.
    class Contact(Object):
        pass

    first = Contact(owner=alice.objectId, peer=bob.objectId, note="met at the tower")
    second = Contact(owner=alice.objectId, peer=carol.objectId, note="conference")
    ParseBatcher().batch_save([first, second])
    check("batch_save assigns objectIds", all(len(c.objectId or "") == 10 for c in (first, second)), True)
    check("batch-created objects are queryable", Contact.Query.filter(owner=alice.objectId).count(), 2)
    status, body = rest(port, "POST", "/batch", body={"requests": [
        {"method": "PUT", "path": f"/parse/classes/Contact/{first.objectId}", "body": {"calls": {"__op": "Increment", "amount": 1}}},
        {"method": "GET", "path": f"/parse/classes/Contact/{second.objectId}"},
        {"method": "PUT", "path": f"/parse/classes/Contact/{second.objectId}", "body": {"note": 5}},
    ]})
    check("batch over REST answers in order", [sorted(item.keys())[0] for item in body], ["success", "success", "error"])
    check("batch Increment result", body[0]["success"]["calls"], 1)
    check("batch type mismatch is 111", body[2]["error"]["code"], 111)
    ParseBatcher().batch_delete([first, second])
    check("batch_delete removed both", Contact.Query.filter(owner=alice.objectId).count(), 0)

    # Logout ends the session.
    status, _ = rest(port, "POST", "/logout", body={}, token=logged_in.sessionToken)
    check("logout status", status, 200)
    status, body = rest(port, "GET", "/users/me", token=logged_in.sessionToken)
    check("revoked session → 400 code 209", (status, body.get("code")), (400, 209))


if __name__ == "__main__":
    main()
