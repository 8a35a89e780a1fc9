#!/usr/bin/env python3
# parley-test: run-alone (scripts/test.sh runs it by itself: it measures time, memory or many connections)
"""PostgreSQL crashes (`pg_ctl stop -m immediate`) under a running `parley serve`: every request
that needs the database is answered at once (< 1 s) with its documented error instead of after
the pool's wait timeout (docs/realtime-protocol.md: `unavailable`, close 1013 during `hello`,
REST 503; docs/rest-api.md: Parse 500 code 1; `/ready` 503); a flood of sends on one socket is
answered, never stalled; and everything works again, with no restart of Parley, once
PostgreSQL is back."""
import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import Client, check, create_users, log, pg_bin, run, run_on_nodes  # noqa: E402

import websockets  # noqa: E402

FAST = 1.0  # seconds: "answered at once"
FLOOD = 400  # sends on one socket, past its 256 pending requests


def get(server, path, headers=None):
    request = urllib.request.Request(server.http_url + path, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_for_ready(server, status, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if get(server, "/ready")[0] == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"/ready did not answer {status} within {timeout} s")


def timed(body):
    started = time.monotonic()
    result = body()
    return result, time.monotonic() - started


async def timed_async(awaitable):
    started = time.monotonic()
    result = await awaitable
    return result, time.monotonic() - started


async def refused_hello(url, token, device):
    """Opens a socket, sends hello; returns (frames received, close code)."""
    ws = await websockets.connect(url, ping_interval=None)
    await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device}))
    frames = []
    try:
        async for raw in ws:
            frames.append(json.loads(raw))
    except websockets.ConnectionClosed:
        pass
    return frames, ws.close_code


async def main():
    # The Parse find reads a class no one created: clients may (its answer is the point here).
    await run_on_nodes(scenario, "outage", extra=["--realtime-send-burst", "100000", "--realtime-send-rate", "100000",
                                                  "--allow-client-class-creation"])


async def scenario(postgres, server):
    (alice, alice_token), (bob, bob_token), (_, carol_token) = create_users(postgres, "outage", "o", 3)
    parse = {"X-Parse-Application-Id": "parley"}
    a = await Client.connect(server.ws_url, alice_token, "alice-phone")
    b = await Client.connect(server.ws_url, bob_token, "bob-phone")
    ok = await a.send_message([bob], "before the outage")
    check(ok["type"] == "ok", ok)
    check((await b.next_event("message"))["text"] == "before the outage", "delivered before the outage")

    postgres._run([pg_bin("pg_ctl"), "-D", postgres.data, "-m", "immediate", "-w", "stop"])
    wait_for_ready(server, 503, 5)
    log("PostgreSQL stopped; /ready says 503")

    (status, body), seconds = timed(lambda: get(server, "/ready"))
    check(status == 503 and body["status"] == "unavailable" and "unreachable" in body["reason"], body)
    check(seconds < FAST, f"/ready took {seconds:.2f} s")

    (status, body), seconds = timed(lambda: get(server, "/parse/classes/Note", parse))
    check(status == 500 and body.get("code") == 1, (status, body))
    check(seconds < FAST, f"Parse find took {seconds:.2f} s")

    status, body = server.request("POST", "/v1/messages", {"to": [bob], "text": "rest"}, token=alice_token)
    check(status == 503 and body.get("code") == "unavailable", (status, body))

    # An open socket stays open; its send gets `unavailable` at once.
    reply, seconds = await timed_async(a.send_message([bob], "during the outage"))
    check(reply["type"] == "error" and reply["code"] == "unavailable", reply)
    check(seconds < FAST, f"message.send took {seconds:.2f} s")

    # A flood past the 256 pending requests of a connection: every send is answered, fast.
    async def flood():
        return await asyncio.gather(*(a.send_message([bob], f"flood {i}") for i in range(FLOOD)))
    replies, seconds = await timed_async(flood())
    codes = {reply.get("code") for reply in replies}
    check(codes <= {"unavailable", "too_many_pending"} and "unavailable" in codes, codes)
    check(seconds < 2 * FAST, f"{FLOOD} sends took {seconds:.2f} s")
    log(f"{FLOOD} sends answered in {seconds:.2f} s: {sorted(codes)}")

    # hello: a session that was looked up before (cached) and one that was not: both refused with 1013.
    for token, device in ((bob_token, "bob-laptop"), (carol_token, "carol-phone")):
        (frames, code), seconds = await timed_async(refused_hello(server.ws_url, token, device))
        check(code == 1013, f"close {code} after {frames}")
        check(frames and frames[-1]["type"] == "error" and frames[-1]["code"] == "unavailable", frames)
        check(seconds < FAST, f"hello took {seconds:.2f} s")
    log("during the outage: /ready 503, Parse 500 code 1, REST 503, message.send unavailable, hello closed 1013, all < 1 s")

    # Back: no Parley restart needed.
    postgres._run([pg_bin("pg_ctl"), "-D", postgres.data, "-l", os.path.join(postgres.directory, "postgres.log"), "-w", "start"])
    wait_for_ready(server, 200, 20)
    ok = await a.send_message([bob], "after the outage")
    check(ok["type"] == "ok", ok)
    check((await b.next_event("message"))["text"] == "after the outage", "delivered after the outage")
    c = await Client.connect(server.ws_url, carol_token, "carol-phone")
    status, _ = get(server, "/parse/classes/Note", parse)
    check(status == 200, status)
    log("after PostgreSQL came back: sends, hello and Parse work again")
    for client in (a, b, c):
        await client.close()


if __name__ == "__main__":
    run(main)
