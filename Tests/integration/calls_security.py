#!/usr/bin/env python3
"""What a call shows of the callee's devices, over real sockets against `parley serve` and a real
PostgreSQL: `call.answered.deviceId` and the history's `answeredDeviceId` are an opaque label of
the answering device, never its id (an installationId, which lets its holder save the
installation). The label is the same for the same device in every call, on every node and after
a restart (a keyed hash, key in the database), and differs for the same device id of another user.
A call also makes the caller a contact of the callee (presence and typing).
"""
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calls_support import CallClient, DeviceLabels, ParleyServer, TempPostgres, check, create_users, log, new_call_id, run  # noqa: E402

SHARED_DEVICE = "6f1d0c3e-2b4a-4f5e-9d8c-7b6a5f4e3d2c"


async def answered_call(caller, callee):
    """A call from `caller` answered by `callee` then hung up; returns (call.answered, call.ended details)."""
    call_id = new_call_id()
    reply = await caller.call("invite", call_id, to=callee.user_id, sdp="v=0 offer")
    check(reply["type"] == "ok", f"invite: {reply}")
    await callee.next_event("call.incoming", call_id)
    check((await callee.call("answer", call_id, sdp="v=0 answer"))["type"] == "ok", "answer")
    answered = await caller.next_event("call.answered", call_id)
    check((await caller.call("hangup", call_id))["type"] == "ok", "hangup")
    ended = await callee.next_event("call.ended", call_id)
    await caller.next_event("call.ended", call_id)
    return answered, ended["details"]


async def ended_history(server, token, count):
    """The user's `GET /v1/calls` once its `count` calls show as ended: a call's row is rewritten
    at its end after `call.ended` went out (docs/realtime-protocol.md, "Storage"), so a read right
    after the event may still see the call as the invite wrote it."""
    deadline = time.monotonic() + 10
    while True:
        status, body = server.request("GET", "/v1/calls", token=token)
        check(status == 200, body)
        ended = [c for c in body["results"] if c.get("endCause")]
        if len(ended) >= count or time.monotonic() > deadline:
            return body["results"]
        await asyncio.sleep(0.02)


async def main():
    postgres = TempPostgres()
    url = postgres.create_database("callsec")
    server = ParleyServer(url).start()
    try:
        (alice, alice_token), (bob, bob_token), (carol, carol_token) = create_users(postgres, "callsec", "cs", 3)
        labels = DeviceLabels(postgres, "callsec")
        a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
        b1 = await CallClient.connect(server.ws_url, bob_token, SHARED_DEVICE)
        c1 = await CallClient.connect(server.ws_url, carol_token, SHARED_DEVICE)

        first, first_details = await answered_call(a1, b1)
        second, second_details = await answered_call(a1, b1)
        other, other_details = await answered_call(a1, c1)
        log(f"labels: bob's device {first['deviceId']} twice {second['deviceId']}, carol's same device id {other['deviceId']}")
        for label in (first["deviceId"], other["deviceId"], first_details["answeredDeviceId"]):
            check(SHARED_DEVICE not in label and "6f1d0c3e" not in label, f"the device id shows through: {label}")
        check(first["deviceId"] == second["deviceId"] == first_details["answeredDeviceId"] == second_details["answeredDeviceId"],
              "the label is stable for a device")
        check(other["deviceId"] != first["deviceId"] and other_details["answeredDeviceId"] == other["deviceId"],
              "the same device id of another user has another label")
        check(first["deviceId"] == labels(bob, SHARED_DEVICE) and other["deviceId"] == labels(carol, SHARED_DEVICE),
              "the label is the keyed hash of the database's key (the same on every node)")

        for token, calls in ((alice_token, 3), (bob_token, 2)):
            shown = {c["answeredDeviceId"] for c in await ended_history(server, token, calls)}
            check(SHARED_DEVICE not in shown and shown <= {labels(bob, SHARED_DEVICE), labels(carol, SHARED_DEVICE)},
                  f"history shows labels only: {shown}")
        log("call.answered and history show an opaque label, stable per device, different per user: ok")

        # The label survives a restart (its key is in the database).
        server.stop()
        server.start()
        status, body = server.request("GET", "/v1/calls", token=bob_token)
        check({c["answeredDeviceId"] for c in body["results"]} == {first["deviceId"]}, f"after a restart: {body['results'][:1]}")

        # The call made alice bob's contact: bob may watch alice's presence, not the other way round.
        b2 = await CallClient.connect(server.ws_url, bob_token, "bob-tablet")
        reply = await b2.request({"type": "presence.subscribe", "users": [alice]})
        check(reply["type"] == "ok" and not reply.get("failed"), f"the caller reached the callee: {reply}")
        a2 = await CallClient.connect(server.ws_url, alice_token, "alice-tablet")
        reply = await a2.request({"type": "presence.subscribe", "users": [bob]})
        check(reply.get("failed") == [{"userId": bob, "reason": "not_a_contact"}], f"the callee never reached the caller: {reply}")
        log("a call makes the caller a contact of the callee: ok")
        for client in (a2, b2):
            await client.close()
    except BaseException:
        log(server.log())
        raise
    finally:
        server.stop()
        postgres.stop()


if __name__ == "__main__":
    run(main)
