#!/usr/bin/env python3
"""Call signalling end to end over real sockets with an outside client (`websockets` from PyPI).

A caller with one device calls a callee with two: both ring, one answers, the other gets
otherDeviceAnswered, candidates and negotiation go only between the two parties, hang-up ends it
with hungUp and the details on both sides. Then every end cause (timers shortened by options),
the offline callee whose device connects 3 s after the invite (gets call.incoming) or after
expiresAt (does not), connection loss during ringing and during a call, the clear errors,
GET /v1/calls and GET /v1/turn (checked against coturn's algorithm, and against a real coturn
when it is installed)."""
import asyncio
import base64
import hashlib
import hmac
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import tools_required  # noqa: E402
from calls_support import (CallClient, DeviceLabels, ParleyServer, TempPostgres, check, create_users, free_port, log,  # noqa: E402
                           new_call_id, run)

REACH, RING, GRACE = 4.0, 2.0, 1.0
LIFETIME = REACH + RING
TURN_SECRET = "calls-integration-secret"
LABEL = None  # the server's device labels (DeviceLabels), set by main
DETAIL_FIELDS = ("startedAt", "progressedAt", "rungAt", "answeredAt", "establishedAt", "endedAt", "endCause", "error", "video",
                 "duration", "setupDuration", "notifyingDuration", "ringingDuration")


async def main():
    postgres = TempPostgres()
    url = postgres.create_database("calls")
    # coturn takes its port first (seen bound in its log), so nothing else does before the TURN check at the end.
    coturn = Coturn() if Coturn.available() else None
    if coturn is None and tools_required():
        raise RuntimeError("coturn (turnserver, turnutils_uclient) is missing under CI: bash scripts/setup.sh installs it")
    turn_port = coturn.port if coturn else free_port()
    server = ParleyServer(url, extra=[
        "--call-reach-timeout", f"{int(REACH * 1000)}ms", "--call-ring-timeout", f"{int(RING * 1000)}ms",
        "--call-grace-period", f"{int(GRACE * 1000)}ms", "--call-max-per-user", "1",
        "--turn-uris", f"turn:127.0.0.1:{turn_port}?transport=udp", "--turn-secret", TURN_SECRET, "--turn-ttl", "10m",
    ]).start()
    try:
        users = create_users(postgres, "calls", "c", 8)
        global LABEL
        LABEL = DeviceLabels(postgres, "calls")
        await full_call(server, users)
        await errors(server, users)
        await end_causes(server, users)
        await connection_loss(server, users)
        await offline_callee(server, users)
        await history_and_turn(server, users, turn_port, coturn)
    except BaseException:
        log(server.log())
        raise
    finally:
        server.stop()
        postgres.stop()
        if coturn:
            coturn.stop()


def ok(reply, what):
    check(reply["type"] == "ok", f"{what}: {reply}")


def error(reply, code, what):
    check(reply["type"] == "error" and reply["code"] == code, f"{what}: expected {code}, got {reply}")


def check_details(ended, cause, what):
    details = ended["details"]
    check(ended["endCause"] == cause and details["endCause"] == cause, f"{what}: {ended}")
    for field in DETAIL_FIELDS:
        check(field in details, f"{what}: details lack {field}: {details}")


async def full_call(server, users):
    (alice, alice_token), (bob, bob_token), (carol, carol_token) = users[0], users[1], users[2]
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    b1 = await CallClient.connect(server.ws_url, bob_token, "bob-phone")
    b2 = await CallClient.connect(server.ws_url, bob_token, "bob-tablet")
    c1 = await CallClient.connect(server.ws_url, carol_token, "carol-phone")
    call_id = new_call_id()
    started = time.monotonic()

    ok(await a1.call("invite", call_id, to=bob, video=True, sdp="v=0 offer", headers={"name": "Alice"}), "invite")
    for device in (b1, b2):
        incoming = await device.next_event("call.incoming", call_id)
        check(incoming["from"] == alice and incoming["video"] is True and incoming["sdp"] == "v=0 offer"
              and incoming["headers"] == {"name": "Alice"} and incoming["expiresAt"].endswith("Z")
              and "seq" not in incoming, f"live to a connected device: {incoming}")
    await a1.next_event("call.progress", call_id)
    ok(await b1.call("ringing", call_id), "ringing b1")
    ok(await b2.call("ringing", call_id), "ringing b2")
    await a1.next_event("call.ringing", call_id)
    # Caller candidates before the answer are held for the device that answers.
    ok(await a1.call("candidates", call_id, candidates=[{"candidate": "early", "sdpMid": "0"}]), "early candidates")

    ok(await b2.call("answer", call_id, sdp="v=0 answer"), "answer b2")
    error(await b1.call("answer", call_id, sdp="v=0 late"), "already_answered", "second answer")
    answered = await a1.next_event("call.answered", call_id)
    check(answered["sdp"] == "v=0 answer" and answered["deviceId"] == LABEL(bob, "bob-tablet"), answered)
    other = await b1.next_event("call.ended", call_id)
    check(other["endCause"] == "otherDeviceAnswered", other)
    early = await b2.next_event("call.candidates", call_id)
    check(early["candidates"] == [{"candidate": "early", "sdpMid": "0"}], early)
    log("ring both, answer on one, the other gets otherDeviceAnswered: ok")

    # Relayed between the two parties only.
    ok(await a1.call("candidates", call_id, candidates=[{"candidate": "from-alice"}]), "caller candidates")
    ok(await b2.call("candidates", call_id, candidates=[{"candidate": "from-bob"}]), "callee candidates")
    error(await b1.call("candidates", call_id, candidates=[{"candidate": "x"}]), "not_a_party", "candidates from the other device")
    error(await c1.call("candidates", call_id, candidates=[{"candidate": "x"}]), "not_a_party", "candidates from a stranger")
    check((await b2.next_event("call.candidates", call_id))["candidates"] == [{"candidate": "from-alice"}], "relay to callee")
    check((await a1.next_event("call.candidates", call_id))["candidates"] == [{"candidate": "from-bob"}], "relay to caller")
    ok(await a1.call("negotiate", call_id, sdp="v=0 re-offer", kind="offer"), "re-offer")
    renegotiate = await b2.next_event("call.negotiate", call_id)
    check(renegotiate["sdp"] == "v=0 re-offer" and renegotiate["kind"] == "offer", renegotiate)
    ok(await b2.call("negotiate", call_id, sdp="v=0 re-answer", kind="answer"), "re-answer")
    check((await a1.next_event("call.negotiate", call_id))["kind"] == "answer", "re-answer relayed")
    await b1.expect_no_event("call.candidates", 0.3)
    await b1.expect_no_event("call.negotiate", 0.1)
    await c1.expect_no_event(None, 0.1)
    log("candidates and negotiation only between the two parties: ok")

    ok(await b2.call("established", call_id), "established")
    await a1.next_event("call.established", call_id)
    await b2.next_event("call.established", call_id)
    await asyncio.sleep(0.2)
    ok(await a1.call("hangup", call_id), "hangup")
    for device in (a1, b2):
        ended = await device.next_event("call.ended", call_id)
        check_details(ended, "hungUp", "hang up")
        details = ended["details"]
        check(details["video"] is True and details["answeredDeviceId"] == LABEL(bob, "bob-tablet") and details["from"] == alice
              and details["to"] == bob, details)
        check(all(details[f] is not None for f in ("startedAt", "progressedAt", "rungAt", "answeredAt", "establishedAt", "endedAt")), details)
        check(150 <= details["duration"] < (time.monotonic() - started) * 1000 + 50, details)
    await b1.expect_no_event("call.ended", 0.3, call_id=call_id)
    error(await b2.call("hangup", call_id), "call_ended", "hang up an ended call")
    for device in (a1, b1, b2, c1):
        await device.close()
    log("hang up: hungUp with details on both sides: ok")


async def errors(server, users):
    (alice, alice_token), (bob, bob_token), (carol, carol_token) = users[0], users[1], users[2]
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    b1 = await CallClient.connect(server.ws_url, bob_token, "bob-phone")
    c1 = await CallClient.connect(server.ws_url, carol_token, "carol-phone")
    error(await a1.call("invite", new_call_id(), to=alice, sdp="x"), "cannot_call_self", "call yourself")
    error(await a1.call("invite", "not-a-uuid", to=bob, sdp="x"), "bad_request", "bad callId")
    error(await a1.call("invite", new_call_id(), to=bob), "bad_request", "no sdp")
    call_id = new_call_id()
    ok(await a1.call("invite", call_id, to=bob, sdp="x"), "invite")
    await b1.next_event("call.incoming", call_id)
    error(await a1.call("invite", call_id, to=bob, sdp="x"), "call_exists", "second invite with the same callId")
    error(await c1.call("invite", call_id.upper(), to=bob, sdp="x"), "call_exists", "same callId in upper case")
    error(await c1.call("answer", call_id, sdp="x"), "not_callee", "answer from a device of another user")
    error(await a1.call("answer", call_id, sdp="x"), "not_callee", "answer from the caller")
    error(await b1.call("negotiate", call_id, sdp="x", kind="offer"), "not_answered", "negotiate before the answer")
    error(await b1.call("ringing", new_call_id()), "call_not_found", "unknown call")
    ok(await a1.call("hangup", call_id), "cancel")
    ended = await b1.next_event("call.ended", call_id)
    check(ended["endCause"] == "canceled", ended)
    for kind, fields in (("ringing", {}), ("answer", {"sdp": "x"}), ("candidates", {"candidates": ["c"]}), ("hangup", {})):
        error(await b1.call(kind, call_id, **fields), "call_ended", f"{kind} for an ended call")
    error(await a1.call("invite", call_id, to=bob, sdp="x"), "call_exists", "reuse an ended call's id")
    unknown = await b1.request({"type": "call.nonsense", "callId": call_id})
    error(unknown, "bad_request", "unknown call frame type")
    for device in (a1, b1, c1):
        await device.close()
    log("clear errors (self, duplicate id, other user's answer, ended call, unknown call): ok")


async def start_call(caller, callee_devices, callee_id, **invite):
    call_id = new_call_id()
    ok(await caller.call("invite", call_id, to=callee_id, sdp="v=0 offer", **invite), "invite")
    for device in callee_devices:
        await device.next_event("call.incoming", call_id)
    return call_id


async def end_causes(server, users):
    (alice, alice_token), (bob, bob_token), (carol, carol_token), (dave, _) = users[0], users[1], users[2], users[3]
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    b1 = await CallClient.connect(server.ws_url, bob_token, "bob-phone")
    b2 = await CallClient.connect(server.ws_url, bob_token, "bob-tablet")
    c1 = await CallClient.connect(server.ws_url, carol_token, "carol-phone")

    # canceled, denied, busy (declined with busy).
    for who, fields, cause in ((a1, {}, "canceled"), (b1, {}, "denied"), (b2, {"reason": "busy"}, "busy")):
        call_id = await start_call(a1, (b1, b2), bob)
        ok(await who.call("hangup", call_id, **fields), cause)
        for device in (a1, b1, b2):
            check_details(await device.next_event("call.ended", call_id), cause, cause)
        log(f"{cause}: ok")

    # failure with user_not_found, at once.
    call_id = new_call_id()
    sent = time.monotonic()
    ok(await a1.call("invite", call_id, to="nosuchuser", sdp="x"), "invite unknown")
    ended = await a1.next_event("call.ended", call_id, timeout=2)
    check(ended["endCause"] == "failure" and ended["error"] == "user_not_found" and time.monotonic() - sent < 2, f"at once, not after the reach timeout: {ended}")
    log("failure/user_not_found at once: ok")

    # noAnswer: rang, not answered within the ring timeout.
    call_id = await start_call(a1, (b1, b2), bob)
    ok(await b1.call("ringing", call_id), "ringing")
    rang = time.monotonic()
    for device in (a1, b1, b2):
        check_details(await device.next_event("call.ended", call_id, timeout=RING + 3), "noAnswer", "noAnswer")
    check(RING - 0.2 <= time.monotonic() - rang <= RING + 3, f"noAnswer after {time.monotonic() - rang:.2f} s")
    log("noAnswer after the ring timeout: ok")

    # timeout: dave has no device, nobody is reached.
    call_id = new_call_id()
    sent = time.monotonic()
    ok(await a1.call("invite", call_id, to=dave, sdp="x"), "invite dave")
    ended = await a1.next_event("call.ended", call_id, timeout=REACH + 3)
    check_details(ended, "timeout", "timeout")
    check(ended["details"]["progressedAt"] is None, ended)
    check(REACH - 0.2 <= time.monotonic() - sent <= REACH + 3, f"timeout after {time.monotonic() - sent:.2f} s")
    log("timeout when no device is reached: ok")

    # busy: bob is in a call (limit 1), so carol's call to bob ends busy; alice may not place a second call.
    first = await start_call(a1, (b1, b2), bob)
    second = new_call_id()
    ok(await c1.call("invite", second, to=bob, sdp="x"), "carol invites bob")
    check_details(await c1.next_event("call.ended", second), "busy", "busy (limit)")
    error(await a1.call("invite", new_call_id(), to=carol, sdp="x"), "too_many_calls", "second call of the caller")
    await b1.expect_no_event("call.incoming", 0.3)
    ok(await a1.call("hangup", first), "hang up first")
    log("busy at the concurrent-call limit: ok")
    for device in (a1, b1, b2, c1):
        await device.close()


async def connection_loss(server, users):
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    # The caller's connection drops while the callee rings: the callee devices get inactive at once.
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    b1 = await CallClient.connect(server.ws_url, bob_token, "bob-phone")
    b2 = await CallClient.connect(server.ws_url, bob_token, "bob-tablet")
    call_id = await start_call(a1, (b1, b2), bob)
    ok(await b1.call("ringing", call_id), "ringing")
    a1.drop()
    for device in (b1, b2):
        check_details(await device.next_event("call.ended", call_id, timeout=2), "inactive", "caller lost while ringing")
    log("caller's connection lost during ringing → callee devices get inactive: ok")

    # During a call: the other side gets inactive after the grace period.
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    call_id = await start_call(a1, (b1, b2), bob)
    ok(await b2.call("answer", call_id, sdp="a"), "answer")
    await a1.next_event("call.answered", call_id)
    ok(await a1.call("established", call_id), "established")
    await b2.next_event("call.established", call_id)
    a1.drop()
    lost = time.monotonic()
    ended = await b2.next_event("call.ended", call_id, timeout=GRACE + 3)
    check_details(ended, "inactive", "caller lost during the call")
    check(GRACE - 0.1 <= time.monotonic() - lost <= GRACE + 3, f"inactive after {time.monotonic() - lost:.2f} s")
    log("caller's connection lost during a call → inactive after the grace period: ok")

    # Back within the grace period (a new connection of the same device): the call goes on.
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    call_id = await start_call(a1, (b1, b2), bob)
    ok(await b1.call("answer", call_id, sdp="a"), "answer")
    await a1.next_event("call.answered", call_id)
    b1.drop()
    await asyncio.sleep(GRACE / 3)
    b1 = await CallClient.connect(server.ws_url, bob_token, "bob-phone")
    await asyncio.sleep(GRACE + 0.5)
    await a1.expect_no_event("call.ended", 0.1, call_id=call_id)
    ok(await b1.call("candidates", call_id, candidates=["after-reconnect"]), "candidates after reconnecting")
    check((await a1.next_event("call.candidates", call_id))["candidates"] == ["after-reconnect"], "relay after reconnecting")
    ok(await a1.call("hangup", call_id), "hang up")
    check_details(await b1.next_event("call.ended", call_id), "hungUp", "hang up after reconnecting")
    log("party back within the grace period keeps the call: ok")
    for device in (a1, b1, b2):
        await device.close()


async def offline_callee(server, users):
    (alice, alice_token), (erin, erin_token) = users[0], users[4]
    # Erin's phone is known (it connected once) but offline.
    e1 = await CallClient.connect(server.ws_url, erin_token, "erin-phone")
    resume = e1.welcome["lastSeq"]
    await e1.close()
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")

    # Connects 3 s after the invite (woken by a push): gets call.incoming, rings, answers.
    call_id = new_call_id()
    ok(await a1.call("invite", call_id, to=erin, sdp="v=0 offer"), "invite erin")
    await a1.next_event("call.progress", call_id)
    await asyncio.sleep(3)
    e1 = await CallClient.connect(server.ws_url, erin_token, "erin-phone", resume_after=resume)
    incoming = await e1.next_event("call.incoming", call_id, timeout=2)
    check(incoming["from"] == alice and incoming["sdp"] == "v=0 offer" and incoming["seq"] > resume, f"from the device's queue: {incoming}")
    ok(await e1.call("ringing", call_id), "ringing after connecting")
    await a1.next_event("call.ringing", call_id)
    ok(await e1.call("answer", call_id, sdp="v=0 answer"), "answer after connecting")
    check((await a1.next_event("call.answered", call_id))["deviceId"] == LABEL(erin, "erin-phone"), "answered by the late device")
    ok(await e1.call("hangup", call_id), "hang up")
    await a1.next_event("call.ended", call_id)
    await e1.ack()
    resume = e1.last_seq
    await e1.close()
    log("offline callee connecting 3 s after the invite gets call.incoming: ok")

    # Connects after expiresAt: nothing about the call is delivered.
    call_id = new_call_id()
    ok(await a1.call("invite", call_id, to=erin, sdp="v=0 offer"), "invite erin again")
    await a1.next_event("call.progress", call_id)
    check_details(await a1.next_event("call.ended", call_id, timeout=REACH + 3), "timeout", "nobody rang")
    await asyncio.sleep(LIFETIME - REACH + 0.8)
    e1 = await CallClient.connect(server.ws_url, erin_token, "erin-phone", resume_after=resume)
    await e1.expect_no_event(None, 1.0)
    await e1.close()
    await a1.close()
    log("offline callee connecting after expiresAt gets nothing: ok")


def coturn_password(username):
    return base64.b64encode(hmac.new(TURN_SECRET.encode(), username.encode(), hashlib.sha1).digest()).decode()


async def history_and_turn(server, users, turn_port, coturn):
    (alice, alice_token), (bob, bob_token), (carol, carol_token) = users[0], users[1], users[2]
    status, body = server.request("GET", "/v1/calls", token=alice_token)
    check(status == 200, body)
    calls = body["results"]
    check(len(calls) >= 10, f"alice's calls: {len(calls)}")
    started = [c["startedAt"] for c in calls]
    check(started == sorted(started, reverse=True), "newest first")
    check(all(c["state"] == "ended" and c["endCause"] for c in calls), calls[:3])
    check(calls[-1]["endCause"] == "hungUp" and calls[-1]["answeredDeviceId"] == LABEL(bob, "bob-tablet"), calls[-1])
    for field in DETAIL_FIELDS:
        check(field in calls[0], f"history item lacks {field}")
    # Paging with before/limit walks the same list.
    paged, before = [], None
    while True:
        query = "/v1/calls?limit=3" + (f"&before={before}" if before else "")
        status, page = server.request("GET", query, token=alice_token, bearer=False)
        check(status == 200, page)
        if not page["results"]:
            break
        paged += [c["callId"] for c in page["results"]]
        before = page["results"][-1]["callId"]
    check(paged == [c["callId"] for c in calls], "pages cover the history in order")
    status, body = server.request("GET", "/v1/calls", token=bob_token)
    check(status == 200 and any(c["from"] == alice and c["to"] == bob for c in body["results"]), "the callee sees the calls too")
    status, body = server.request("GET", "/v1/calls", token=carol_token)
    check(all(c["from"] == carol or c["to"] == carol for c in body["results"]), "only one's own calls")
    status, body = server.request("GET", "/v1/calls")
    check(status == 401 and body["code"] == "invalid_session", body)
    status, body = server.request("GET", "/v1/calls?limit=0", token=alice_token)
    check(status == 400 and body["code"] == "bad_request", body)
    log("GET /v1/calls: both directions, newest first, paged: ok")

    status, turn = server.request("GET", "/v1/turn", token=alice_token)
    check(status == 200 and set(turn) == {"uris", "username", "password", "ttl"}, turn)
    expiry, user = turn["username"].split(":", 1)
    check(user == alice and turn["ttl"] == 600 and abs(int(expiry) - (time.time() + 600)) < 5, turn)
    check(turn["password"] == coturn_password(turn["username"]), "password is base64(HMAC-SHA1(secret, username))")
    check(turn["uris"] == [f"turn:127.0.0.1:{turn_port}?transport=udp"], turn)
    status, body = server.request("GET", "/v1/turn")
    check(status == 401, body)
    log("GET /v1/turn: coturn shared-secret credentials: ok")

    if coturn:
        check(coturn.allocate(turn["username"], turn["password"]), f"coturn accepts the credential; its log:\n{open(coturn.log_path).read()[-3000:]}")
        check(not coturn.allocate(turn["username"], coturn_password("0:" + alice)), "coturn refuses a wrong password")
        log("a real coturn (use-auth-secret) accepts the /v1/turn credential: ok")
    else:
        log("coturn not installed: real TURN check skipped")


class Coturn:
    """coturn with the test secret (`--use-auth-secret`) on loopback, when it is installed."""

    def __init__(self, attempts=8):
        self.directory = tempfile.mkdtemp(prefix="parley-coturn-")
        for attempt in range(attempts):
            self.port = free_port()
            self.log_path = os.path.join(self.directory, f"turn-{attempt}.log")
            relay = max(20000, min(free_port(), 65000 - 200))
            self.process = subprocess.Popen([
                "turnserver", "--use-auth-secret", f"--static-auth-secret={TURN_SECRET}", "--realm", "parley", "-n",
                "--listening-ip", "127.0.0.1", "--relay-ip", "127.0.0.1", "--listening-port", str(self.port),
                "--min-port", str(relay), "--max-port", str(relay + 199), "--no-tls", "--no-dtls", "--no-cli",
                "--allow-loopback-peers", "--log-file", self.log_path, "--simple-log", "--pidfile", os.path.join(self.directory, "turn.pid"),
            ], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._listening():
                return
            self.stop(keep_directory=True)
        raise RuntimeError(f"coturn could not bind a free port in {attempts} attempts")

    def _listening(self, timeout=30):
        """coturn cannot bind port 0 and report it, and retries a taken port forever: its log says
        which happened ("Cannot bind" before "(admin thread)", its last start-up line)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open(self.log_path, errors="replace") as f:
                    text = f.read()
            except FileNotFoundError:
                text = ""
            if "Cannot bind" in text:
                return False
            if "(admin thread)" in text:
                return True
            if self.process.poll() is not None:
                raise RuntimeError(f"coturn exited with {self.process.returncode}:\n{text[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"coturn did not start within {timeout} s")

    @staticmethod
    def available():
        return shutil.which("turnserver") is not None and shutil.which("turnutils_uclient") is not None

    def allocate(self, username, password, attempts=5):
        """Whether a relay allocation with these credentials succeeds (retried while coturn starts)."""
        for _ in range(attempts):
            try:
                result = subprocess.run(["turnutils_uclient", "-y", "-n", "2", "-p", str(self.port), "-u", username, "-w", password,
                                         "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
                if result.returncode == 0:
                    return True
            except subprocess.TimeoutExpired:
                pass
            if password != coturn_password(username):
                return False
            time.sleep(0.5)
        return False

    def stop(self, keep_directory=False):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if not keep_directory:
            shutil.rmtree(self.directory, ignore_errors=True)


if __name__ == "__main__":
    run(main)
