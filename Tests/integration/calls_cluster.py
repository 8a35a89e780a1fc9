#!/usr/bin/env python3
"""Call signalling across two `parley serve` nodes on one PostgreSQL.

The caller is on node A; the callee has one device on node B and one on node A. Both ring, the
device on B answers (its frames are forwarded to the call's owner node A), A's callee device gets
otherDeviceAnswered, candidates and negotiation (with SDPs longer than one NOTIFY payload) go
between the two parties only, in both directions, and a hang-up from B ends the call with hungUp
and the details on both sides. Then the answering device on B drops: the owner ends the call
after the grace period with inactive (the loss is reported across nodes); and when it drops and
connects to B again within the grace period, without sending any call frame, the call goes on
(the return is reported across nodes too)."""
import asyncio
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calls_support import CallClient, DeviceLabels, check, create_users, log, new_call_id, run  # noqa: E402
from realtime_support import run_on_nodes  # noqa: E402

LABEL = None  # the server's device labels (DeviceLabels), set by scenario

GRACE = 1.0
DETAIL_FIELDS = ("startedAt", "progressedAt", "rungAt", "answeredAt", "establishedAt", "endedAt", "endCause", "error", "video",
                 "duration", "setupDuration", "notifyingDuration", "ringingDuration")


def ok(reply, what):
    check(reply["type"] == "ok", f"{what}: {reply}")


def error(reply, code, what):
    check(reply["type"] == "error" and reply["code"] == code, f"{what}: expected {code}, got {reply}")


async def main():
    await run_on_nodes(scenario, "ccluster", nodes=2, extra=["--call-grace-period", f"{int(GRACE * 1000)}ms"])


async def scenario(postgres, node_a, node_b):
    users = create_users(postgres, "ccluster", "k", 3)
    global LABEL
    LABEL = DeviceLabels(postgres, "ccluster")
    await cross_node_call(node_a, node_b, users)
    await remote_party_lost(node_a, node_b, users)
    await remote_party_back(node_a, node_b, users)


async def cross_node_call(node_a, node_b, users):
    (alice, alice_token), (bob, bob_token), (carol, carol_token) = users
    a1 = await CallClient.connect(node_a.ws_url, alice_token, "alice-phone")
    b_remote = await CallClient.connect(node_b.ws_url, bob_token, "bob-phone")
    b_local = await CallClient.connect(node_a.ws_url, bob_token, "bob-tablet")
    c1 = await CallClient.connect(node_b.ws_url, carol_token, "carol-phone")
    call_id = new_call_id()
    started = time.monotonic()

    ok(await a1.call("invite", call_id, to=bob, video=True, sdp="v=0 offer", headers={"name": "Alice"}), "invite")
    local_incoming = await b_local.next_event("call.incoming", call_id)
    check("seq" not in local_incoming, f"live on the caller's node: {local_incoming}")
    remote_incoming = await b_remote.next_event("call.incoming", call_id)
    check(remote_incoming["from"] == alice and remote_incoming["sdp"] == "v=0 offer" and "seq" in remote_incoming,
          f"queued for the device on node B: {remote_incoming}")
    await b_remote.ack()
    await a1.next_event("call.progress", call_id)
    ok(await b_remote.call("ringing", call_id), "ringing from node B")
    await a1.next_event("call.ringing", call_id)
    ok(await b_local.call("ringing", call_id), "ringing from node A")
    ok(await a1.call("candidates", call_id, candidates=[{"candidate": "early", "sdpMid": "0"}]), "early candidates")
    log("ring both (one device on each node): ok")

    long_answer = "v=0 answer " + "a" * 20000
    ok(await b_remote.call("answer", call_id, sdp=long_answer), "answer on node B")
    error(await b_local.call("answer", call_id, sdp="v=0 late"), "already_answered", "second answer on node A")
    answered = await a1.next_event("call.answered", call_id)
    check(answered["sdp"] == long_answer and answered["deviceId"] == LABEL(bob, "bob-phone"), "answered from node B, long SDP intact")
    other = await b_local.next_event("call.ended", call_id)
    check(other["endCause"] == "otherDeviceAnswered", other)
    early = await b_remote.next_event("call.candidates", call_id)
    check(early["candidates"] == [{"candidate": "early", "sdpMid": "0"}] and "seq" not in early, f"relayed, unqueued: {early}")
    log("answer on node B; callee device on node A gets otherDeviceAnswered: ok")

    ok(await a1.call("candidates", call_id, candidates=[{"candidate": "from-alice"}]), "caller candidates")
    ok(await b_remote.call("candidates", call_id, candidates=[{"candidate": "from-bob"}]), "callee candidates")
    error(await b_local.call("candidates", call_id, candidates=[{"candidate": "x"}]), "not_a_party", "candidates from the other device")
    error(await c1.call("candidates", call_id, candidates=[{"candidate": "x"}]), "call_not_found", "candidates from a stranger on B")
    check((await b_remote.next_event("call.candidates", call_id))["candidates"] == [{"candidate": "from-alice"}], "A → B relay")
    check((await a1.next_event("call.candidates", call_id))["candidates"] == [{"candidate": "from-bob"}], "B → A forward")
    long_offer = "v=0 re-offer " + "o" * 30000
    ok(await a1.call("negotiate", call_id, sdp=long_offer, kind="offer"), "re-offer")
    renegotiate = await b_remote.next_event("call.negotiate", call_id)
    check(renegotiate["sdp"] == long_offer and renegotiate["kind"] == "offer", "long re-offer relayed to node B")
    ok(await b_remote.call("negotiate", call_id, sdp="v=0 re-answer", kind="answer"), "re-answer")
    check((await a1.next_event("call.negotiate", call_id))["kind"] == "answer", "re-answer forwarded")
    for n in range(10):
        ok(await a1.call("candidates", call_id, candidates=[{"candidate": f"burst-{n}"}]), "burst")
    for n in range(10):
        relayed = await b_remote.next_event("call.candidates", call_id)
        check(relayed["candidates"] == [{"candidate": f"burst-{n}"}], f"relays keep their order: {relayed}")
    # Sent from node B without waiting for the replies: forwarded in order.
    replies = await asyncio.gather(*(b_remote.call("candidates", call_id, candidates=[{"candidate": f"b-burst-{n}"}]) for n in range(10)))
    check(all(reply["type"] == "ok" for reply in replies), replies)
    for n in range(10):
        forwarded = await a1.next_event("call.candidates", call_id)
        check(forwarded["candidates"] == [{"candidate": f"b-burst-{n}"}], f"forwards keep their order: {forwarded}")
    await b_local.expect_no_event("call.candidates", 0.3)
    await b_local.expect_no_event("call.negotiate", 0.1)
    await c1.expect_no_event(None, 0.1)
    log("candidates and negotiation A ↔ B between the two parties only (long SDPs, in order): ok")

    ok(await b_remote.call("established", call_id), "established")
    await a1.next_event("call.established", call_id)
    await b_remote.next_event("call.established", call_id)
    await asyncio.sleep(0.2)
    ok(await b_remote.call("hangup", call_id), "hangup from node B")
    for device in (a1, b_remote):
        ended = await device.next_event("call.ended", call_id)
        details = ended["details"]
        check(ended["endCause"] == "hungUp" and details["endCause"] == "hungUp", f"{device.name}: {ended}")
        for field in DETAIL_FIELDS:
            check(field in details, f"{device.name}: details lack {field}: {details}")
        check(details["answeredDeviceId"] == LABEL(bob, "bob-phone") and details["from"] == alice and details["to"] == bob, details)
        check(all(details[f] is not None for f in ("startedAt", "progressedAt", "rungAt", "answeredAt", "establishedAt", "endedAt")),
              details)
        check(150 <= details["duration"] < (time.monotonic() - started) * 1000 + 50, details)
    await b_local.expect_no_event("call.ended", 0.3, call_id=call_id)
    error(await b_remote.call("hangup", call_id), "call_ended", "hang up an ended call from node B")
    for device in (a1, b_remote, b_local, c1):
        await device.close()
    log("hang up from node B: hungUp with details on both sides: ok")


async def call_answered_on_node_b_then_dropped(node_a, node_b, users):
    """Alice on node A calls Bob; Bob's phone on node B answers, then its connection drops."""
    (alice, alice_token), (bob, bob_token), _ = users
    a1 = await CallClient.connect(node_a.ws_url, alice_token, "alice-phone")
    b_remote = await CallClient.connect(node_b.ws_url, bob_token, "bob-phone")
    call_id = new_call_id()
    ok(await a1.call("invite", call_id, to=bob, video=False, sdp="v=0 offer"), "invite")
    await b_remote.next_event("call.incoming", call_id)
    await b_remote.ack()
    ok(await b_remote.call("answer", call_id, sdp="v=0 answer"), "answer on node B")
    await a1.next_event("call.answered", call_id)
    b_remote.drop()
    return a1, call_id, bob_token


async def remote_party_lost(node_a, node_b, users):
    a1, call_id, _ = await call_answered_on_node_b_then_dropped(node_a, node_b, users)
    ended = await a1.next_event("call.ended", call_id, timeout=GRACE + 15)
    check(ended["endCause"] == "inactive", f"the owner learnt the loss on node B: {ended}")
    await a1.close()
    log("answering device on node B drops: inactive after the grace period: ok")


async def remote_party_back(node_a, node_b, users):
    a1, call_id, bob_token = await call_answered_on_node_b_then_dropped(node_a, node_b, users)
    await asyncio.sleep(GRACE / 4)
    b_remote = await CallClient.connect(node_b.ws_url, bob_token, "bob-phone")
    await asyncio.sleep(GRACE + 1)
    await a1.expect_no_event("call.ended", 0.1, call_id=call_id)
    ok(await a1.call("hangup", call_id), "hang up after the device came back")
    ended = await b_remote.next_event("call.ended", call_id, timeout=5)
    check(ended["endCause"] == "hungUp", f"the device back on node B is still the party: {ended}")
    for device in (a1, b_remote):
        await device.close()
    log("answering device on node B drops and connects again within the grace period: the call goes on: ok")


if __name__ == "__main__":
    run(main)
