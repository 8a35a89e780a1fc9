#!/usr/bin/env python3
# parley-test: start-first (one of the longest scripts: scripts/test.sh starts it first in its pool)
"""docs/openapi.yaml against a live `parley serve` with schemathesis: no request may answer 5xx
and every answer must match the description.

Starts a throwaway PostgreSQL and $PARLEY_BIN on free ports, creates three users over the REST
API (their session tokens are what schemathesis authenticates with), a few objects, a message
and an installation, then runs schemathesis once per identity, each with a fixed seed in
deterministic mode and a bounded number of examples:

  user       app id, REST key and a user's session token (Bearer under /v1); everything but
             the operations that end that session
  anonymous  app id and REST key, no session (/parse)
  none       no credentials at all (every /parse operation 403, every /v1 one 401)
  teardown   DELETE /parse/sessions/{id} and /parse/users/{id} as a user of their own
  logout     POST /parse/logout with a session of its own
  master     app id and master key (/parse), last: it may delete anything

Afterwards the server must still serve (health, signup, login, /users/me, a write and a find, a
REST send and history) and its log must hold no internal error. Any failure fails the script.
PARLEY_SCHEMATHESIS_EXAMPLES raises the number of examples for a longer hunt.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import REPO, ParleyServer, TempPostgres, check, log  # noqa: E402

SPEC = os.path.join(REPO, "docs", "openapi.yaml")
APP_ID = "schemathesis-app"
REST_KEY = "schemathesis-rest-key"
MASTER_KEY = "schemathesis-master-key"
SEED = 20261130
# Test cases per operation and phase: the whole script takes about 100 s on 2 idle cores.
MAX_EXAMPLES = int(os.environ.get("PARLEY_SCHEMATHESIS_EXAMPLES", "25"))

# Checks every run makes: all of schemathesis's checks (not_a_server_error and
# response_schema_conformance first among them), except those switched off below.
#
# Switched off for every operation:
# - object_level_authorization, use_after_free, ensure_resource_availability: they judge
#   sequences of calls (another identity reading a created object, a read after a delete), which
#   only the stateful phase makes. That phase is off: the description declares no links, and
#   inferred ones double the run time. Tests/ParleyParseTests covers ACLs and deletes.
#
# Switched off for /parse only (PARSE_DISABLED_CHECKS):
# - positive_data_acceptance: a request can match the schema and still be refused with 400 for
#   reasons no schema can state: a field keeps the type of its first write (111), usernames and
#   emails are unique (202/203), query operators have operand rules (102). Parse Server refuses
#   them the same way.
# - ignored_auth: Parse Server answers an invalid session token with 400 code 209, not 401/403,
#   and ignores a wrong master key; the check expects 401/403 for every bad credential. The
#   `none` run checks that every /parse operation refuses a request without credentials (403).
# - unsupported_method: a method no /parse endpoint serves answers like an unknown path, 404
#   code 107 ("cannot route"), as Parse Server answers 404 there, not 405.
DISABLED_CHECKS = ["object_level_authorization", "use_after_free", "ensure_resource_availability"]
PARSE_DISABLED_CHECKS = ["positive_data_acceptance", "ignored_auth", "unsupported_method"]


# Strings that broke servers before, drawn (with the seeded ids and names, half of the time)
# for the string parameters and body fields in NASTY_PARAMETERS: NUL (PostgreSQL's text and
# jsonb refuse it), its escaped and percent-encoded spellings, regex and SQL metacharacters, bidi
# and astral characters, numbers past every range, JSON-looking text. Headers are left out:
# the HTTP client cannot send most of these there.
NASTY_STRINGS = ["\u0000", "a\u0000b", "\\u0000", "%00", "[", ".*(", "'; SELECT 1; --", "\u202e", "\U0001d54f",
                 "-1", "1e400", "9223372036854775808", "null", "{}", "__proto__", "$where", "a b\r\nX: y"]

NASTY_PARAMETERS = [
    "path.className", "path.objectId", "query.username", "query.email", "query.password", "query.order", "query.keys",
    "query.with", "query.before", "body.username", "body.email", "body.password", "body.installationId", "body.deviceType",
    "body.deviceToken", "body.voipDeviceToken", "body.clientMessageId", "body.text", "body.to[*]", "body.requests[*].path",
    "body.requests[*].method",
]


def toml(value):
    """A TOML value (JSON's strings, numbers and arrays are TOML's too; TOML has no surrogate
    escapes, so characters outside ASCII are written as they are)."""
    return json.dumps(value, ensure_ascii=False)


def write_config(directory, name, schemes, include_operation_ids=(), exclude_operation_ids=(), include_path_regex=None,
                 max_examples=MAX_EXAMPLES, dictionaries=None):
    """A schemathesis.toml for one run: the shared check policy plus this identity's credentials.
    `dictionaries` maps a parameter (`path.className`, `query.username`, `body.to[*]`) to values
    (ids and names of the seeded data) it is drawn from, with NASTY_STRINGS, half of the time."""
    lines = [
        f"seed = {SEED}",
        "workers = 1",
        "max-failures = 50",
        "request-timeout = 10",
        "[generation]",
        "deterministic = true",
        f"max-examples = {max_examples}",
        'database = "none"',
        "[checks]",
    ]
    lines += [f"{check_name}.enabled = false" for check_name in DISABLED_CHECKS]
    lines += ["[phases]", "stateful.enabled = false"]
    values = {parameter: list(NASTY_STRINGS) for parameter in NASTY_PARAMETERS}
    for parameter, seeded in (dictionaries or {}).items():
        values[parameter] = seeded + values.get(parameter, [])
    bindings = []
    for index, (parameter, entries) in enumerate(values.items()):
        lines += [f"[dictionaries.values{index}]", f"values = {toml(entries)}"]
        bindings.append(f'{toml(parameter)} = {{ dictionary = "values{index}", probability = 0.5 }}')
    lines += ["[parameters]"] + bindings
    for scheme, value in schemes.items():
        key = "bearer" if scheme == "bearer" else "api_key"
        lines += [f"[auth.openapi.{scheme}]", f"{key} = {toml(value)}"]
    lines += ["[[operations]]", 'include-path-regex = "^/parse/"']
    lines += [f"checks.{check_name}.enabled = false" for check_name in PARSE_DISABLED_CHECKS]
    path = os.path.join(directory, f"{name}.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    arguments = []
    for operation_id in include_operation_ids:
        arguments += ["--include-operation-id", operation_id]
    for operation_id in exclude_operation_ids:
        arguments += ["--exclude-operation-id", operation_id]
    if include_path_regex:
        arguments += ["--include-path-regex", include_path_regex]
    return path, arguments


def schemathesis(directory, name, base_url, schemes, **selection):
    config, arguments = write_config(directory, name, schemes, **selection)
    command = [os.path.join(os.path.dirname(sys.executable), "schemathesis"), "--config-file", config, "--no-color", "run", SPEC,
               "--url", base_url, "--report", "junit", "--report-dir", os.path.join(directory, f"{name}-report")] + arguments
    log(f"--- schemathesis run `{name}`")
    started = time.monotonic()
    result = subprocess.run(command, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log(result.stdout[-30000:])
    log(f"--- `{name}`: exit {result.returncode} in {time.monotonic() - started:.1f} s")
    return result.returncode == 0


def rest(base_url, method, path, body=None, params=None, token=None, master=False, headers=None):
    """One request; returns (status, parsed JSON body or raw text)."""
    url = base_url + path
    if params:
        url += "?" + urllib.parse.urlencode(params)
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None, method=method)
    if path.startswith("/parse"):
        request.add_header("X-Parse-Application-Id", APP_ID)
        request.add_header("X-Parse-REST-API-Key", REST_KEY)
        if master:
            request.add_header("X-Parse-Master-Key", MASTER_KEY)
        if token:
            request.add_header("X-Parse-Session-Token", token)
    elif token:
        request.add_header("Authorization", "Bearer " + token)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def signup(base_url, username, password):
    status, user = rest(base_url, "POST", "/parse/users", {"username": username, "password": password})
    check(status == 201, f"signup {username}: {status} {user}")
    return user


def login(base_url, username, password):
    status, user = rest(base_url, "GET", "/parse/login", params={"username": username, "password": password})
    check(status == 200, f"login {username}: {status} {user}")
    return user["sessionToken"]


def session_id(base_url, token):
    status, session = rest(base_url, "GET", "/parse/sessions/me", token=token)
    check(status == 200, f"/sessions/me: {status} {session}")
    return session["objectId"]


def seed_data(base_url):
    """Users with sessions, objects to find, a message between two users, an installation; the
    ids and names the runs draw parameters from."""
    alice = signup(base_url, "st-alice", "alice-pw")
    bob = signup(base_url, "st-bob", "bob-pw")
    carol = signup(base_url, "st-carol", "carol-pw")
    objects = []
    for score in range(3):
        status, body = rest(base_url, "POST", "/parse/classes/GameScore", {"score": score, "player": "st-alice", "tags": ["a"]},
                            token=alice["sessionToken"])
        check(status == 201, f"create GameScore: {status} {body}")
        objects.append(body["objectId"])
    status, body = rest(base_url, "POST", "/v1/messages", {"clientMessageId": "seed-1", "to": [bob["objectId"]], "text": "hello"},
                        token=alice["sessionToken"])
    check(status == 200, f"send a message: {status} {body}")
    status, installation = rest(base_url, "POST", "/parse/installations", {"installationId": "st-device-1", "deviceType": "ios"},
                                token=alice["sessionToken"])
    check(status == 201, f"create an installation: {status} {installation}")
    # Carol's second session is what the teardown run deletes (and then Carol herself).
    carol_second = login(base_url, "st-carol", "carol-pw")
    return {
        "alice": alice, "bob": bob, "carol": carol,
        "logout_token": login(base_url, "st-bob", "bob-pw"),
        "ids": objects + [installation["objectId"], alice["objectId"], bob["objectId"], session_id(base_url, alice["sessionToken"])],
        "carol_ids": [carol["objectId"], session_id(base_url, carol_second)],
    }


def dictionaries_for(seeded):
    """Parameter values the runs draw from: the seeded classes, ids and credentials."""
    return {
        "path.className": ["GameScore", "_User", "_Session", "_Installation"],
        "path.objectId": seeded["ids"],
        "query.username": ["st-alice", "st-bob"],
        "query.password": ["alice-pw", "bob-pw"],
        "body.username": ["st-alice", "st-bob"],
        "body.password": ["alice-pw", "bob-pw"],
        "query.with": [seeded["bob"]["objectId"]],
        "body.to[*]": [seeded["bob"]["objectId"]],
    }


DEFAULT_PERMISSIONS = {op: {"*": True} for op in ("find", "count", "get", "create", "update", "delete", "addField")}
DEFAULT_PERMISSIONS["protectedFields"] = {"*": []}


def reset_schema(base_url, class_name):
    """Gives `class_name` Parse's default permissions again and drops its required or defaulted
    fields: the master run may have locked it through /schemas, as any master key may."""
    status, schema = rest(base_url, "GET", f"/parse/schemas/{class_name}", master=True)
    if status != 200:
        return
    options = [name for name, field in schema.get("fields", {}).items() if field.get("required") or "defaultValue" in field]
    body = {"classLevelPermissions": DEFAULT_PERMISSIONS, "fields": {name: {"__op": "Delete"} for name in options}}
    status, answer = rest(base_url, "PUT", f"/parse/schemas/{class_name}", body, master=True)
    check(status == 200, f"resetting the schema of {class_name}: {status} {answer}")


def still_serves(server):
    """The server answers every kind of request after the runs (with a new user: the runs may
    have deleted or changed the seeded ones, and the master run the classes' permissions)."""
    base_url = server.http_url
    check(server.process.poll() is None, "parley exited during the run")
    for class_name in ("_User", "_Session", "AfterRun"):
        reset_schema(base_url, class_name)
    status, body = rest(base_url, "GET", "/health")
    check((status, body) == (200, {"status": "ok"}), f"/health after the runs: {status} {body}")
    status, created = rest(base_url, "POST", "/parse/users", {"username": "st-after", "password": "after-pw"})
    check(status == 201, f"signup after the runs: {status} {created}")
    status, user = rest(base_url, "POST", "/parse/login", {"username": "st-after", "password": "after-pw"})
    check(status == 200 and user.get("objectId") == created["objectId"], f"login after the runs: {status} {user}")
    status, me = rest(base_url, "GET", "/parse/users/me", token=user["sessionToken"])
    check(status == 200 and me.get("username") == "st-after", f"/users/me after the runs: {status} {me}")
    status, body = rest(base_url, "POST", "/parse/classes/AfterRun", {"n": 1}, token=user["sessionToken"])
    check(status == 201, f"create after the runs: {status} {body}")
    status, found = rest(base_url, "GET", "/parse/classes/AfterRun", params={"where": json.dumps({"n": 1}), "count": "1"})
    check(status == 200 and found.get("count") == 1, f"find after the runs: {status} {found}")
    status, sent = rest(base_url, "POST", "/v1/messages", {"clientMessageId": "after-1", "to": [created["objectId"]], "text": "hi"},
                        token=user["sessionToken"])
    check(status == 200, f"/v1/messages send after the runs: {status} {sent}")
    status, history = rest(base_url, "GET", "/v1/messages", params={"with": created["objectId"]}, token=user["sessionToken"])
    check(status == 200 and len(history.get("results", [])) == 1, f"/v1/messages history after the runs: {status} {history}")
    log("the server still serves: health, signup, login, /users/me, create, find, /v1/messages: ok")


def unserved_operations(base_url):
    """Operations of the description this build does not serve yet (`/parse/health` and
    `/parse/serverInfo` land in another branch): they are left out of the runs, with a note."""
    missing = []
    for operation_id, path in (("parseHealth", "/parse/health"), ("serverInfo", "/parse/serverInfo")):
        status, body = rest(base_url, "GET", path, master=True)
        if status == 404 and isinstance(body, dict) and body.get("code") == 107:
            log(f"note: {path} is not served by this build; {operation_id} is left out of the runs")
            missing.append(operation_id)
    return missing


def internal_errors(server_log):
    """Lines where the server logged a request it answered with a 5xx."""
    markers = ("parse request failed", "batch sub-request failed", "handler failed")
    return [line for line in server_log.splitlines() if any(marker in line for marker in markers)]


def main():
    postgres = TempPostgres()
    server = None
    ok = False
    try:
        url = postgres.create_database("openapi")
        server = ParleyServer(url, extra=[
            "--app-id", APP_ID, "--rest-api-key", REST_KEY, "--master-key", MASTER_KEY,
            "--password-ops-limit", "1", "--password-mem-limit", "1048576", "--allow-client-class-creation",
            "--turn-uris", "turn:127.0.0.1:3478?transport=udp", "--turn-secret", "schemathesis-turn-secret",
        ]).start()
        base_url = server.http_url
        seeded = seed_data(base_url)
        unserved = unserved_operations(base_url)
        directory = tempfile.mkdtemp(prefix="parley-schemathesis-")
        alice_token = seeded["alice"]["sessionToken"]
        user = {"appId": APP_ID, "restKey": REST_KEY, "sessionToken": alice_token, "bearer": alice_token}
        anonymous = {"appId": APP_ID, "restKey": REST_KEY}
        master = {"appId": APP_ID, "masterKey": MASTER_KEY}
        # Operations that end the session a run authenticates with run last, each with a session of its own.
        ending = ["logOut", "deleteSession", "deleteUser"]
        parse_only = "^/parse/"
        dictionaries = dictionaries_for(seeded)
        runs = [
            ("user", user, {"exclude_operation_ids": ending + unserved, "dictionaries": dictionaries}),
            ("anonymous", anonymous, {"exclude_operation_ids": unserved, "include_path_regex": parse_only, "dictionaries": dictionaries}),
            ("none", {}, {"exclude_operation_ids": unserved, "max_examples": 5}),
            ("teardown", dict(anonymous, sessionToken=seeded["carol"]["sessionToken"]),
             {"include_operation_ids": ["deleteSession", "deleteUser"], "dictionaries": {"path.objectId": seeded["carol_ids"]}}),
            ("logout", dict(anonymous, sessionToken=seeded["logout_token"]), {"include_operation_ids": ["logOut"]}),
            ("master", master, {"exclude_operation_ids": unserved, "include_path_regex": parse_only, "dictionaries": dictionaries}),
        ]
        failed = [name for name, schemes, selection in runs if not schemathesis(directory, name, base_url, schemes, **selection)]
        check(not failed, f"schemathesis found failures in the runs {failed} (see above)")
        still_serves(server)
        errors = internal_errors(server.log())
        check(not errors, "the server logged internal errors:\n" + "\n".join(errors[:20]))
        ok = True
        log("openapi_schemathesis: passed")
    finally:
        if not ok and server is not None:
            lines = server.log().splitlines()
            errors = [line for line in lines if "level=error" in line or "level=critical" in line]
            log("--- server log: errors\n" + "\n".join(errors[-40:]) + "\n--- server log: last lines\n" + "\n".join(lines[-20:]))
        if server is not None:
            server.stop()
        postgres.stop()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as error:
        log(f"FAIL  {error}")
        sys.exit(1)
