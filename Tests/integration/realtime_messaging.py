#!/usr/bin/env python3
"""Realtime messaging end to end with an outside client (the `websockets` library): two users,
three devices; send, receive, ack, receipts, offline device catching up in order, resumeAfter
replaying exactly the unacknowledged tail, idempotent re-send, unknown recipients, protocol
errors and close codes, replacement of a device's connection, REST send and history paging, and a ban from another process
refusing a cached session on every path."""
import asyncio
import collections
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import REPO, Client, check, create_users, log, parley_binary, run, run_on_nodes  # noqa: E402

import websockets  # noqa: E402


async def expect_close(ws, code, send=None):
    if send is not None:
        await ws.send(send)
    frames = []
    try:
        async for raw in ws:
            frames.append(json.loads(raw))
    except websockets.ConnectionClosed:
        pass
    check(ws.close_code == code, f"expected close {code}, got {ws.close_code} ({ws.close_reason}) after {frames}")
    return frames


async def main():
    await run_on_nodes(scenario, "rt", extra=["--realtime-hello-timeout", "2s"])


async def scenario(postgres, server):
    (alice, alice_token), (bob, bob_token) = create_users(postgres, "rt", "u", 2)
    ws_url = server.ws_url

    # --- Two users, three devices. ---
    a1 = await Client.connect(ws_url, alice_token, "alice-phone")
    a2 = await Client.connect(ws_url, alice_token, "alice-laptop")
    b1 = await Client.connect(ws_url, bob_token, "bob-phone")
    check(a1.welcome == {"type": "welcome", "userId": alice, "deviceId": "alice-phone", "lastSeq": 0, "gap": False}, a1.welcome)

    # Send with an unknown recipient: the rest is sent, the unknown one reported.
    ok = await a1.send_message([bob, "nosuchuser"], "hello bob", headers={"x-kind": "greeting"})
    check(ok["type"] == "ok" and ok["failed"] == [{"userId": "nosuchuser", "reason": "user_not_found"}], ok)
    message_id = ok["messageId"]
    check(ok["sentAt"].endswith("Z") and len(ok["sentAt"]) == 24, ok)
    got = await b1.next_event("message")
    check(got["messageId"] == message_id and got["from"] == alice and got["to"] == [bob] and got["text"] == "hello bob"
          and got["headers"] == {"x-kind": "greeting"} and got["seq"] == 1 and got["sentAt"] == ok["sentAt"], got)
    copy = await a2.next_event("message")
    check(copy["messageId"] == message_id and copy["seq"] == 1, f"the sender's other device gets a copy: {copy}")
    await a1.expect_no_event(0.3)
    log("send, fan-out to recipient and sender's other device: ok")

    # Ack → delivered receipt on both of Alice's devices; read → read receipt.
    await b1.ack(1)
    for device in (a1, a2):
        receipt = await device.next_event("receipt")
        check(receipt["kind"] == "delivered" and receipt["messageId"] == message_id and receipt["userId"] == bob, receipt)
    read = await b1.request({"type": "message.read", "messageIds": [message_id]})
    check(read["type"] == "ok", read)
    for device in (a1, a2):
        receipt = await device.next_event("receipt")
        check(receipt["kind"] == "read" and receipt["messageId"] == message_id, receipt)
    log("ack → delivered receipts, message.read → read receipts: ok")

    # --- Offline device receives everything in order after reconnecting. ---
    a2_last = 3  # message copy (1), delivered (2), read (3)
    await a2.close()
    texts = [f"while offline {n}" for n in range(20)]
    for text in texts:
        check((await b1.send_message([alice], text))["type"] == "ok", text)
    for text in texts:
        event = await a1.next_event("message")
        check(event["text"] == text, f"online device: expected {text}, got {event}")
    a2 = await Client.connect(ws_url, alice_token, "alice-laptop", resume_after=a2_last)
    check(a2.welcome["lastSeq"] == a2_last + 20, a2.welcome)
    seqs = []
    for text in texts:
        event = await a2.next_event("message")
        check(event["text"] == text, f"reconnected device: expected {text}, got {event}")
        seqs.append(event["seq"])
    check(seqs == list(range(a2_last + 1, a2_last + 21)), seqs)
    log("offline device receives all 20 in order after reconnect: ok")

    # --- resumeAfter replays exactly the unacknowledged tail. ---
    acked = await a2.request({"type": "ack", "upTo": a2_last + 10})  # answered once the acknowledgement is committed
    check(acked["type"] == "ok", acked)
    await a2.close()
    a2 = await Client.connect(ws_url, alice_token, "alice-laptop", resume_after=a2_last + 10)
    replay = [await a2.next_event() for _ in range(10)]
    check([event["seq"] for event in replay] == list(range(a2_last + 11, a2_last + 21)), replay)
    check([event["text"] for event in replay] == texts[10:], replay)
    await a2.expect_no_event(0.5)
    # Acknowledged events are gone: resuming from 0 replays only the unacknowledged ones.
    await a2.close()
    a2 = await Client.connect(ws_url, alice_token, "alice-laptop", resume_after=0)
    replay = [await a2.next_event() for _ in range(10)]
    check([event["seq"] for event in replay] == list(range(a2_last + 11, a2_last + 21)), replay)
    await a2.expect_no_event(0.5)
    log("resumeAfter replays exactly the unacked tail: ok")

    # --- Idempotent re-send. ---
    first = await a1.send_message([bob], "only once", client_id="client-msg-1")
    again = await a1.send_message([bob], "only once", client_id="client-msg-1")
    check(again["messageId"] == first["messageId"] and again.get("duplicate") is True and again["sentAt"] == first["sentAt"], again)
    delivered = await b1.next_event("message")
    check(delivered["messageId"] == first["messageId"], delivered)
    await b1.expect_no_event(0.5)
    log("idempotent re-send: ok")

    # --- Unknown recipient only. ---
    failed = await a1.send_message(["ghost00001"], "nobody")
    check(failed["type"] == "error" and failed["code"] == "user_not_found"
          and failed["failed"] == [{"userId": "ghost00001", "reason": "user_not_found"}], failed)
    log("unknown recipient → user_not_found: ok")

    # --- Request errors keep the session open. ---
    bad = await a1.request({"type": "message.send", "clientMessageId": "x", "to": [f"ghost{n:05d}" for n in range(101)], "text": "x"})
    check(bad["code"] == "too_many_recipients", f"101 recipients refused with too_many_recipients: {str(bad)[:200]}")
    long = await a1.request({"type": "message.send", "clientMessageId": "x", "to": [bob], "text": "x" * 65537})
    check(long["code"] == "text_too_long", long)
    big = await a1.request({"type": "message.send", "clientMessageId": "x", "to": [bob], "text": "x", "headers": {"h": "v" * 1100}})
    check(big["code"] == "headers_too_large", big)
    unknown = await a1.request({"type": "no.such.thing"})
    check(unknown["code"] == "unknown_type", unknown)
    await a1.ws.send("not json")
    err = await a1.next_event("error")
    check(err["code"] == "bad_json" and err["re"] is None, err)
    log("request errors: ok")

    # --- Presence and typing. ---
    presence = await a1.request({"type": "presence.subscribe", "users": [bob]})
    check(presence["type"] == "ok", presence)
    state = await a1.next_event("presence")
    check(state["userId"] == bob and state["online"] is True, state)
    await b1.ws.send(json.dumps({"type": "typing", "to": alice, "active": True}))
    typing = await a1.next_event("typing")
    check(typing == {"type": "typing", "from": bob, "active": True}, typing)
    b2 = await Client.connect(ws_url, bob_token, "bob-tablet")
    await b1.close()
    await b2.close()
    gone = await a1.next_event("presence")
    check(gone["userId"] == bob and gone["online"] is False and gone["lastSeenAt"], gone)
    log("presence and typing: ok")

    # --- Close codes. ---
    ws = await websockets.connect(ws_url, ping_interval=None)
    await expect_close(ws, 4002, send=json.dumps({"type": "ack", "upTo": 1}))
    ws = await websockets.connect(ws_url, ping_interval=None)
    frames = await expect_close(ws, 4004, send=json.dumps({"type": "hello", "sessionToken": "r:wrong", "deviceId": "d"}))
    check(frames and frames[0]["code"] == "invalid_session", frames)
    ws = await websockets.connect(ws_url, ping_interval=None)
    frames = await expect_close(ws, 4003)
    check(frames and frames[0]["code"] == "hello_timeout", frames)
    old = await Client.connect(ws_url, bob_token, "bob-phone")
    new = await Client.connect(ws_url, bob_token, "bob-phone")
    result = await asyncio.wait_for(old.closed, 10)
    check(old.ws.close_code == 4001, f"replaced connection closed with {old.ws.close_code} ({result})")
    # The same deviceId under another user is another device.
    other = await Client.connect(ws_url, alice_token, "bob-phone")
    check(other.welcome["userId"] == alice, other.welcome)
    # A replacement is sent before the welcome; a round trip on the older connection after it proves none came.
    still = await new.request({"type": "ack", "upTo": 0})
    check(still["type"] == "ok" and new.ws.close_code is None, "a device id of another user must not replace this connection")
    log("close codes 4001/4002/4003/4004: ok")

    # --- REST send and history. ---
    status, body = server.request("POST", "/v1/messages", {"clientMessageId": "rest-1", "to": [alice], "text": "via rest"}, token=bob_token)
    check(status == 200 and body["failed"] == [], (status, body))
    # Bob's phone first replays what it never acknowledged, then gets the copy of the REST send.
    while (event := await new.next_event("message"))["text"] != "via rest":
        check(event["seq"] < 20, event)
    status, again = server.request("POST", "/v1/messages", {"clientMessageId": "rest-1", "to": [alice], "text": "via rest"},
                                   token=bob_token, bearer=False)
    check(status == 200 and again["messageId"] == body["messageId"] and again["duplicate"] is True, again)
    status, error = server.request("POST", "/v1/messages", {"clientMessageId": "rest-2", "to": [alice], "text": "x"}, token="r:bad")
    check(status == 401 and error["code"] == "invalid_session", (status, error))
    status, error = server.request("POST", "/v1/messages", {"clientMessageId": "rest-3", "to": ["ghost00002"], "text": "x"}, token=bob_token)
    check(status == 404 and error["code"] == "user_not_found", (status, error))

    status, page1 = server.request("GET", f"/v1/messages?with={bob}&limit=5", token=alice_token)
    check(status == 200 and len(page1["results"]) == 5, (status, page1))
    check(page1["results"][0]["text"] == "via rest" and page1["results"][1]["text"] == "only once", page1)
    everything = list(page1["results"])
    cursor = page1["results"][-1]["messageId"]
    while True:
        status, page = server.request("GET", f"/v1/messages?with={bob}&limit=5&before={cursor}", token=alice_token)
        check(status == 200, (status, page))
        if not page["results"]:
            break
        everything.extend(page["results"])
        cursor = page["results"][-1]["messageId"]
    ids = [message["messageId"] for message in everything]
    check(len(ids) == len(set(ids)) == 23, f"{len(ids)} messages in history")
    check(ids == sorted(ids, reverse=True), "history is newest first")
    check(everything[-1]["text"] == "hello bob", everything[-1])
    status, error = server.request("GET", f"/v1/messages?with={bob}&before=nonsense", token=alice_token)
    check(status == 400 and error["code"] == "bad_request", (status, error))
    log("REST send and history paging: ok")

    # Logging out over the Parse API closes the sockets opened with that session (4006).
    logout = urllib.request.Request(server.http_url + "/parse/logout", data=b"{}", method="POST",
                                    headers={"X-Parse-Application-Id": "parley", "X-Parse-Session-Token": alice_token,
                                             "Content-Type": "application/json"})
    with urllib.request.urlopen(logout, timeout=10) as response:
        check(response.status == 200, response.status)
    for client in (a1, a2, other):
        await asyncio.wait_for(client.closed, 10)
        check(client.ws.close_code == 4006, f"logged-out session's socket closed with {client.ws.close_code}")
    check(new.ws.close_code is None, "another user's socket must stay open")
    log("logout closes the session's sockets with 4006: ok")

    # A ban through another process (`parley user ban`, as another node would ban) refuses Bob's
    # session on every path of this node at once, though this node has it cached: his open socket
    # (4006), /v1 REST (both credential forms), a new hello, and the Parse API.
    status, _ = server.request("GET", "/v1/turn", token=bob_token)
    check(status == 200, f"bob's session works (and is cached) before the ban: {status}")
    banned = subprocess.run([parley_binary(), "user", "ban", bob, "--database-url", server.database_url,
                             "--migrations-dir", os.path.join(REPO, "migrations")], capture_output=True, text=True, timeout=120)
    check(banned.returncode == 0, f"parley user ban: {banned.returncode} {banned.stdout} {banned.stderr}")
    await asyncio.wait_for(new.closed, 10)
    check(new.ws.close_code == 4006, f"the banned user's socket closed with {new.ws.close_code}")
    for method, path, body, bearer in [("GET", "/v1/turn", None, True), ("GET", "/v1/calls", None, False),
                                       ("GET", f"/v1/messages?with={alice}", None, True),
                                       ("POST", "/v1/messages", {"clientMessageId": "banned-1", "to": [alice], "text": "x"}, False)]:
        status, error = server.request(method, path, body, token=bob_token, bearer=bearer)
        check(status == 401 and error["code"] == "invalid_session", f"{method} {path} after the ban: {status} {error}")
    ws = await websockets.connect(ws_url, ping_interval=None)
    frames = await expect_close(ws, 4004, send=json.dumps({"type": "hello", "sessionToken": bob_token, "deviceId": "bob-phone"}))
    check(frames and frames[0]["code"] == "invalid_session", frames)
    me = urllib.request.Request(server.http_url + "/parse/users/me",
                                headers={"X-Parse-Application-Id": "parley", "X-Parse-Session-Token": bob_token})
    try:
        urllib.request.urlopen(me, timeout=10)
        check(False, "the banned user's /parse/users/me answered")
    except urllib.error.HTTPError as error:
        check(error.code == 400 and json.loads(error.read())["code"] == 209, f"/parse/users/me after the ban: {error.code}")
    log("a ban from another process refuses the cached session on every path: ok")

    # --- The default send rate (100/s, burst 200): a pipelined burst of 300 is refused past the burst. ---
    (carol, carol_token), (dan, _) = create_users(postgres, "rt", "r", 2)
    c1 = await Client.connect(ws_url, carol_token, "carol-phone")
    burst = [{"type": "message.send", "clientMessageId": f"burst-{n}", "to": [dan], "text": "x"} for n in range(300)]
    replies = await asyncio.gather(*(c1.request(frame) for frame in burst))
    codes = collections.Counter(reply["type"] if reply["type"] == "ok" else reply["code"] for reply in replies)
    check(set(codes) == {"ok", "rate_limited"} and 200 <= codes["ok"] < 300, f"a burst of 300 sends: {dict(codes)}")
    deadline = asyncio.get_running_loop().time() + 3
    while (after := await c1.send_message([dan], "after the burst"))["type"] != "ok" and asyncio.get_running_loop().time() < deadline:
        check(after["code"] == "rate_limited", after)
        await asyncio.sleep(0.02)
    check(after["type"] == "ok" and not c1.closed.done(), f"the session stays open and sends again after rate_limited: {after}")
    log(f"default send rate: {codes['rate_limited']} of a burst of 300 refused with rate_limited, session open: ok")

    # --- The default device limit (20): a 21st device's hello is closed with 4005 too_many_devices. ---
    dan_token = postgres.psql("rt", f"SELECT token FROM sessions WHERE user_id = '{dan}'")
    devices = [await Client.connect(ws_url, dan_token, f"dan-device-{n}") for n in range(20)]
    ws = await websockets.connect(ws_url, ping_interval=None)
    frames = await asyncio.wait_for(expect_close(ws, 4005, send=json.dumps({"type": "hello", "sessionToken": dan_token, "deviceId": "dan-device-21"})), 10)
    check(frames and frames[0]["code"] == "too_many_devices", frames)
    again = await Client.connect(ws_url, dan_token, "dan-device-0")
    check(again.welcome["type"] == "welcome", "a device already registered still connects at the limit")
    log("default device limit: a 21st device is closed with 4005 too_many_devices, known ones still connect: ok")

    # --- The default presence subscription limit (500): a list of 501 users is refused as bad_request; the session stays
    # open. (too_many_subscriptions needs 500 kept subscriptions, i.e. 500 contacts under the default contacts scope.) ---
    watched = [f"watched{n:05d}" for n in range(501)]
    full = await again.request({"type": "presence.subscribe", "users": watched[:500]})
    check(full["type"] == "ok" and len(full["failed"]) == 500, full)
    over = await again.request({"type": "presence.subscribe", "users": watched})
    check(over["type"] == "error" and over["code"] == "bad_request" and "500" in over["error"], over)
    check(not again.closed.done(), "the session stays open after a list over the subscription limit")
    log("default subscription limit: a presence.subscribe list of 501 users is refused with bad_request: ok")

    for client in (a1, a2, old, new, other, c1, again, *devices):
        await client.close()
    log("realtime messaging: all checks passed")


if __name__ == "__main__":
    run(main)
