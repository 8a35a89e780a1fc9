#!/usr/bin/env python3
"""The realtime limits and error paths of docs/realtime-protocol.md, over real sockets against
`parley serve` with its default limits and a real PostgreSQL:

- `too_many_pending`: with the database holding every `message.read` (a lock on `rt_messages`),
  256 requests wait on one connection and the next 44 are refused at once; all 256 are answered
  `ok` once the lock goes, and the session stays open;
- `too_many_subscriptions`: 500 users who reached the subscriber (rows in `rt_contacts`) are
  watched on one connection, the 501st is refused, and fits after a `presence.unsubscribe`;
- the typing rate limit (5/s per connection): a burst of 20 gets 5 `ok`, then `rate_limited`, and
  typing works again a moment later;
- `presence.unsubscribe`: an unsubscribed connection gets no more changes, while another
  subscriber of the same user does;
- the send rate shared by every path: after a pipelined burst on the socket, a `call.invite`
  pipelined behind it is `rate_limited`, and a REST flood of `POST /v1/messages` gets 429
  `rate_limited`;
- calls' `limit_exceeded`: 256 caller candidates held before the answer, the 257th refused; the
  256 reach the answering device;
- close 1011 with `internal` during `hello` when the database fails the device registration with an
  unexpected error (its function renamed away), and hello works again once it is back;
- an unexpected database error of a send (`rt_send_batch` renamed away): REST 500 `internal`,
  socket `internal` with the session open, nothing stored;
- close 1013 with `unavailable` during `hello` when the database is overloaded: the device
  registration waits on a lock past the 5 s statement timeout;
- `too_many_pending` before the welcome: 64 frames are held while hello waits on the database,
  the next ones are refused at once, and the 64 are answered in order after the welcome;
- close 1001 on SIGTERM.

`--only NAME` runs one section (pending, subscriptions, typing, unsubscribe, rate, candidates, hello1011, internal, hello1013, held)."""
import asyncio
import collections
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import Client, check, create_users, log, pg_bin, run, run_on_nodes  # noqa: E402

import websockets  # noqa: E402

DATABASE = "limits"


class HeldLock:
    """A psql session holding `LOCK TABLE <table>` in an open transaction until `release()`."""

    def __init__(self, postgres, table):
        self.process = subprocess.Popen(
            [pg_bin("psql"), "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres", "-d", DATABASE, "-qAt",
             "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.process.stdin.write(f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline().strip()
        check(line == "locked", f"psql could not lock {table}: {line}")

    def release(self):
        self.process.stdin.write("COMMIT;\n")
        self.process.stdin.close()
        self.process.wait(timeout=30)


async def wait_until(what, condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.01)


def codes_of(replies):
    return collections.Counter(reply["type"] if reply["type"] == "ok" else reply["code"] for reply in replies)


async def too_many_pending(postgres, server, users):
    """256 requests waiting for the database, then too_many_pending at once; all answered after."""
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    a1 = await Client.connect(server.ws_url, alice_token, "alice-pending")
    ok = await a1.send_message([bob], "to be read")
    check(ok["type"] == "ok", ok)
    b1 = await Client.connect(server.ws_url, bob_token, "bob-pending")
    lock = HeldLock(postgres, "rt_messages")
    try:
        reads = [asyncio.ensure_future(b1.request({"type": "message.read", "messageIds": [ok["messageId"]]}, timeout=60))
                 for _ in range(300)]
        # The refusals come while the lock is held: nothing of the first 256 can have been answered.
        await wait_until("44 reads are refused", lambda: sum(r.done() for r in reads) >= 44)
        await asyncio.sleep(0.2)
        answered = [r.result() for r in reads if r.done()]
        check(len(answered) == 44 and codes_of(answered) == {"too_many_pending": 44},
              f"with 256 reads waiting on the database, the others: {dict(codes_of(answered))} ({len(answered)} answered)")
    finally:
        lock.release()
    replies = await asyncio.gather(*reads)
    check(codes_of(replies) == {"ok": 256, "too_many_pending": 44}, f"300 pipelined reads: {dict(codes_of(replies))}")
    check([r["type"] for r in replies[:256]] == ["ok"] * 256, "the first 256 reads are the ones answered ok")
    again = await b1.request({"type": "message.read", "messageIds": [ok["messageId"]]})
    check(again["type"] == "ok" and not b1.closed.done(), f"the session stays open: {again}")
    log("too_many_pending: 256 reads waiting on a locked table, 44 refused at once, all 256 answered ok after: ok")
    for client in (a1, b1):
        await client.close()


async def too_many_subscriptions(postgres, server, users):
    """500 kept presence subscriptions on a connection, the next one refused; unsubscribing frees a place."""
    alice, alice_token = users[0]
    watched = [user for user, _ in create_users(postgres, DATABASE, "w", 501)]
    # Each of them reached alice (the row a message from them would record), so she may watch all of them.
    postgres.psql(DATABASE, f"INSERT INTO rt_contacts (user_id, contact_id) SELECT object_id, '{alice}' FROM users "
                            "WHERE object_id LIKE 'w%'")
    a1 = await Client.connect(server.ws_url, alice_token, "alice-subscriptions")
    full = await a1.request({"type": "presence.subscribe", "users": watched[:500]})
    check(full["type"] == "ok" and not full.get("failed"), f"500 contacts: {str(full)[:300]}")
    states = [await a1.next_event("presence") for _ in range(500)]
    check({state["userId"] for state in states} == set(watched[:500]) and not any(state["online"] for state in states),
          "the current presence of each of the 500")
    over = await a1.request({"type": "presence.subscribe", "users": [watched[500]]})
    check(over["type"] == "error" and over["code"] == "too_many_subscriptions", f"the 501st subscription: {over}")
    again = await a1.request({"type": "presence.subscribe", "users": watched[:10]})
    check(again["type"] == "ok", f"subscribing again to users already watched adds nothing: {again}")
    check((await a1.request({"type": "presence.unsubscribe", "users": [watched[0]]}))["type"] == "ok", "unsubscribe")
    freed = await a1.request({"type": "presence.subscribe", "users": [watched[500]]})
    check(freed["type"] == "ok" and not freed.get("failed"), f"after an unsubscribe the 501st fits: {freed}")
    check(not a1.closed.done(), "the session stays open")
    log("too_many_subscriptions: 500 contacts watched on one connection, the 501st refused, accepted after an unsubscribe: ok")
    await a1.close()


async def typing_rate(postgres, server, users):
    """Typing over 5/s per connection is refused with rate_limited; the session stays open."""
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    a1 = await Client.connect(server.ws_url, alice_token, "alice-typing")
    b1 = await Client.connect(server.ws_url, bob_token, "bob-typing")
    check((await a1.send_message([bob], "so alice's typing reaches bob"))["type"] == "ok", "send")
    replies = await asyncio.gather(*(a1.request({"type": "typing", "to": bob, "active": n % 2 == 0}) for n in range(20)))
    codes = codes_of(replies)
    check(set(codes) == {"ok", "rate_limited"} and 5 <= codes["ok"] <= 7, f"a burst of 20 typing frames: {dict(codes)}")
    relayed = [await b1.next_event("typing") for _ in range(codes["ok"])]
    check(all(event["from"] == alice for event in relayed), relayed)
    await b1.expect_no_event(0.3)
    deadline = time.monotonic() + 3
    while (after := await a1.request({"type": "typing", "to": bob}))["type"] != "ok" and time.monotonic() < deadline:
        check(after["code"] == "rate_limited", after)
        await asyncio.sleep(0.05)
    check(after["type"] == "ok" and not a1.closed.done(), f"typing works again after rate_limited: {after}")
    log(f"typing rate (5/s): {codes['ok']} of a burst of 20 relayed, {codes['rate_limited']} rate_limited, session open: ok")
    for client in (a1, b1):
        await client.close()


async def unsubscribe(postgres, server, users):
    """After presence.unsubscribe a connection gets no change of that user; another subscriber does."""
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    b1 = await Client.connect(server.ws_url, bob_token, "bob-presence")
    check((await b1.send_message([alice], "so alice may watch bob"))["type"] == "ok", "send")
    watcher = await Client.connect(server.ws_url, alice_token, "alice-watcher")
    quitter = await Client.connect(server.ws_url, alice_token, "alice-quitter")
    for client in (watcher, quitter):
        reply = await client.request({"type": "presence.subscribe", "users": [bob]})
        check(reply["type"] == "ok" and not reply.get("failed"), reply)
        state = await client.next_event("presence")
        check(state["userId"] == bob and state["online"] is True, state)
    reply = await quitter.request({"type": "presence.unsubscribe", "users": [bob]})
    check(reply["type"] == "ok", reply)
    await b1.close()
    gone = await watcher.next_event("presence")
    check(gone["userId"] == bob and gone["online"] is False, gone)
    await quitter.expect_no_event(0.3)
    b2 = await Client.connect(server.ws_url, bob_token, "bob-presence")
    back = await watcher.next_event("presence")
    check(back["userId"] == bob and back["online"] is True, back)
    await quitter.expect_no_event(0.3)
    # Unsubscribing from a user never subscribed, or twice, is answered ok.
    reply = await quitter.request({"type": "presence.unsubscribe", "users": [bob, "nosuchuser"]})
    check(reply["type"] == "ok", reply)
    log("presence.unsubscribe: the unsubscribed connection gets no offline/online change, the other subscriber gets both: ok")
    for client in (watcher, quitter, b2):
        await client.close()


def post_message(server, token, n):
    return server.request("POST", "/v1/messages", {"clientMessageId": f"rest-flood-{n}", "to": [token[1]], "text": "x"},
                          token=token[0])


async def send_rate(postgres, server, users):
    """The per-user send rate covers call.invite and REST sends too."""
    (carol, carol_token), (dan, dan_token) = users[2], users[3]
    c1 = await Client.connect(server.ws_url, carol_token, "carol-rate")
    await Client.connect(server.ws_url, dan_token, "dan-rate")
    burst = [{"type": "message.send", "clientMessageId": f"rate-{n}", "to": [dan], "text": "x"} for n in range(300)]
    invite = {"type": "call.invite", "callId": "0b8e7a34-5c2d-4e61-9f0a-3c1b2d4e5f60", "to": dan, "sdp": "v=0 offer"}
    replies = await asyncio.gather(*(c1.request(frame) for frame in burst + [invite]))
    codes = codes_of(replies[:300])
    check(set(codes) == {"ok", "rate_limited"} and 200 <= codes["ok"] < 300, f"a burst of 300 sends: {dict(codes)}")
    check(replies[300]["type"] == "error" and replies[300]["code"] == "rate_limited",
          f"a call.invite right after the burst shares the send rate: {replies[300]}")
    log(f"send rate shared with call.invite: {codes['rate_limited']} sends and the invite refused with rate_limited: ok")

    # REST: a flood from 16 threads outruns 100/s with the bucket drained.
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda n: post_message(server, (carol_token, dan), n), range(200)))
    statuses = collections.Counter(status for status, _ in results)
    refused = [body for status, body in results if status == 429]
    check(set(statuses) <= {200, 429} and statuses[429] > 0, f"a REST flood of 200 sends: {dict(statuses)}")
    check(all(body == {"code": "rate_limited", "error": "sending too fast; slow down"} for body in refused), refused[:3])
    deadline = time.monotonic() + 5
    while (status := post_message(server, (carol_token, dan), "after")[0]) != 200 and time.monotonic() < deadline:
        check(status == 429, status)
        time.sleep(0.05)
    check(status == 200, f"REST sends work again after 429: {status}")
    log(f"REST send rate: {statuses[429]} of a flood of 200 answered 429 rate_limited, then 200 again: ok")
    await c1.close()


async def candidates_limit(postgres, server, users):
    """At most 256 caller candidates are held before the answer; all of them reach the answerer."""
    (erin, erin_token), (frank, frank_token) = users[4], users[5]
    e1 = await Client.connect(server.ws_url, erin_token, "erin-call")
    f1 = await Client.connect(server.ws_url, frank_token, "frank-call")
    call_id = "5d7c2b7e-9d61-4f7b-9c53-0e2f1b6a8c11"
    reply = await e1.request({"type": "call.invite", "callId": call_id, "to": frank, "sdp": "v=0 offer"})
    check(reply["type"] == "ok", reply)
    await f1.next_event("call.incoming")
    for batch in range(4):
        candidates = [f"candidate:{batch * 64 + n} 1 udp 2122260223 10.0.0.1 {50000 + n} typ host" for n in range(64)]
        reply = await e1.request({"type": "call.candidates", "callId": call_id, "candidates": candidates})
        check(reply["type"] == "ok", f"candidates {batch * 64}..{batch * 64 + 63}: {reply}")
    over = await e1.request({"type": "call.candidates", "callId": call_id, "candidates": ["candidate:256 1 udp 1 10.0.0.1 1 typ host"]})
    check(over["type"] == "error" and over["code"] == "limit_exceeded", f"the 257th held candidate: {over}")
    check((await f1.request({"type": "call.answer", "callId": call_id, "sdp": "v=0 answer"}))["type"] == "ok", "answer")
    held = []
    while len(held) < 256:
        event = await f1.next_event("call.candidates")
        held.extend(event["candidates"])
    check([c.split()[0] for c in held] == [f"candidate:{n}" for n in range(256)], f"{len(held)} held candidates")
    check((await e1.request({"type": "call.hangup", "callId": call_id}))["type"] == "ok", "hangup")
    log("calls: 256 caller candidates held before the answer, the 257th limit_exceeded, the 256 handed to the answerer: ok")
    for client in (e1, f1):
        await client.close()


async def refused_hello(url, token, device):
    ws = await websockets.connect(url, ping_interval=None)
    await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device}))
    frames = []
    try:
        async for raw in ws:
            frames.append(json.loads(raw))
    except websockets.ConnectionClosed:
        pass
    return frames, ws.close_code


async def hello_internal_error(postgres, server, users):
    """An unexpected database error during hello closes with 1011 `internal`; the server keeps serving."""
    erin_token = users[4][1]
    function = postgres.psql(DATABASE, "SELECT oid::regprocedure FROM pg_proc WHERE proname = 'rt_register_device'")
    check(function.count("\n") == 0 and function, f"one rt_register_device: {function}")
    postgres.psql(DATABASE, f"ALTER FUNCTION {function} RENAME TO rt_register_device_gone")
    try:
        frames, code = await refused_hello(server.ws_url, erin_token, "erin-1011")
        check(code == 1011, f"hello with the registration failing: close {code} after {frames}")
        check(frames and frames[-1]["type"] == "error" and frames[-1]["code"] == "internal", frames)
    finally:
        postgres.psql(DATABASE, f"ALTER FUNCTION {function.replace('rt_register_device', 'rt_register_device_gone', 1)} "
                                "RENAME TO rt_register_device")
    client = await Client.connect(server.ws_url, erin_token, "erin-1011")
    check(client.welcome["type"] == "welcome", client.welcome)
    await client.close()
    log("hello: an unexpected database error closes with 1011 internal; hello works again after: ok")


async def send_internal_error(postgres, server, users):
    """An unexpected database error of a send: REST 500 `internal`, socket `internal` with the session open."""
    (erin, erin_token), (frank, _) = users[4], users[5]
    e1 = await Client.connect(server.ws_url, erin_token, "erin-500")
    function = postgres.psql(DATABASE, "SELECT oid::regprocedure FROM pg_proc WHERE proname = 'rt_send_batch'")
    check(function and "\n" not in function, f"one rt_send_batch: {function}")
    postgres.psql(DATABASE, f"ALTER FUNCTION {function} RENAME TO rt_send_batch_gone")
    try:
        status, body = server.request("POST", "/v1/messages", {"clientMessageId": "rest-500", "to": [frank], "text": "x"}, token=erin_token)
        check(status == 500 and body == {"code": "internal", "error": "internal error"}, f"REST send with the batch function gone: {status} {body}")
        reply = await e1.send_message([frank], "x", client_id="socket-500")
        check(reply["type"] == "error" and reply["code"] == "internal", f"socket send with the batch function gone: {reply}")
    finally:
        postgres.psql(DATABASE, f"ALTER FUNCTION {function.replace('rt_send_batch', 'rt_send_batch_gone', 1)} RENAME TO rt_send_batch")
    check(not e1.closed.done(), "the session stays open after internal")
    check((await e1.send_message([frank], "x", client_id="socket-500"))["type"] == "ok", "the same send works once the function is back")
    status, body = server.request("POST", "/v1/messages", {"clientMessageId": "rest-500", "to": [frank], "text": "x"}, token=erin_token)
    check(status == 200 and body.get("duplicate") is not True, f"the refused REST send was not stored: {status} {body}")
    log("send with an unexpected database error: REST 500 internal, socket internal with the session open, nothing stored: ok")
    await e1.close()


async def hello_overloaded(postgres, server, users):
    """A device registration that runs past the statement timeout (5 s) closes hello with 1013 `unavailable`."""
    frank_token = users[5][1]
    lock = HeldLock(postgres, "rt_devices")
    try:
        started = time.monotonic()
        frames, code = await refused_hello(server.ws_url, frank_token, "frank-1013")
        seconds = time.monotonic() - started
    finally:
        lock.release()
    check(code == 1013, f"hello with rt_devices locked past the statement timeout: close {code} after {frames}")
    check(frames and frames[-1]["type"] == "error" and frames[-1]["code"] == "unavailable", frames)
    check(4 < seconds < 10, f"refused after {seconds:.1f} s (the 5 s statement timeout)")
    client = await Client.connect(server.ws_url, frank_token, "frank-1013")
    check(client.welcome["type"] == "welcome", client.welcome)
    await client.close()
    log(f"hello: the registration cancelled by the statement timeout ({seconds:.1f} s) closes with 1013 unavailable: ok")


async def held_before_welcome(postgres, server, users):
    """At most 64 frames are held while hello is being answered; more get too_many_pending at once."""
    frank_token = users[5][1]
    lock = HeldLock(postgres, "rt_devices")
    ws = await websockets.connect(server.ws_url, ping_interval=None)
    try:
        await ws.send(json.dumps({"type": "hello", "sessionToken": frank_token, "deviceId": "frank-held"}))
        for n in range(1, 71):
            await ws.send(json.dumps({"type": "ack", "id": n, "upTo": 0}))
        early = [json.loads(await asyncio.wait_for(ws.recv(), 4)) for _ in range(6)]
    finally:
        lock.release()
    check([(f["type"], f.get("code"), f.get("re")) for f in early] == [("error", "too_many_pending", n) for n in range(65, 71)],
          f"before the welcome: {early}")
    welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
    check(welcome["type"] == "welcome", welcome)
    held = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(64)]
    check([(f["type"], f["re"]) for f in held] == [("ok", n) for n in range(1, 65)], f"the held frames after the welcome: {held[:3]}…")
    await ws.close()
    log("hello: 64 frames held until the welcome and then answered in order, 6 more refused at once with too_many_pending: ok")


async def sigterm(postgres, server, users):
    """SIGTERM closes open sessions with 1001."""
    client = await Client.connect(server.ws_url, users[5][1], "frank-sigterm")
    server.process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(client.closed, 30)
    check(client.ws.close_code == 1001, f"close on SIGTERM: {client.ws.close_code} {client.ws.close_reason!r}")
    code = await asyncio.get_running_loop().run_in_executor(None, server.process.wait, 30)
    check(code == 0, f"parley exit status after SIGTERM: {code}")
    log("SIGTERM: sessions closed with 1001, exit 0: ok")


SECTIONS = {"pending": too_many_pending, "subscriptions": too_many_subscriptions, "typing": typing_rate, "unsubscribe": unsubscribe, "rate": send_rate,
            "candidates": candidates_limit, "hello1011": hello_internal_error, "internal": send_internal_error,
            "hello1013": hello_overloaded, "held": held_before_welcome}


async def scenario(postgres, server):
    users = create_users(postgres, DATABASE, "l", 6)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    for name, section in SECTIONS.items():
        if only in (None, name):
            await section(postgres, server, users)
    await sigterm(postgres, server, users)
    log("realtime limits: all checks passed")


async def main():
    await run_on_nodes(scenario, DATABASE)


if __name__ == "__main__":
    run(main)
