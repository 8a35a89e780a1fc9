#!/usr/bin/env python3
"""Push delivery end to end: `parley serve` with a gorush-compatible sink as its gateway, clients
on /v1/socket (the `websockets` library), installations with push tokens.

Checks: an offline recipient gets exactly one collapsed alert push per conversation burst (with
the sender's display field as title); an online recipient gets none; an offline callee gets one
VoIP push with the call fields (callId, caller, video, headers, voip topic, expiration); a call
canceled before its push is sent sends none; the gateway down for 5 attempts then up delivers
the job once, with growing gaps in its attempt log; past the maximum attempts the job is dead
and `parley push retry --dead` sends it; a rejected token is removed from its installation;
an installation registered through /parse/installations gets pushes; `parley push list` and
/metrics show it all."""
import asyncio
import datetime
import json
import os
import sys
import time
import urllib.request
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calls_support import CallClient, ParleyServer, TempPostgres, check, create_users, log, new_call_id, run  # noqa: E402
from push_support import GorushSink, add_installation, jobs, metric, parley_push, wait_for  # noqa: E402

BACKOFF_BASE = 0.2


def pushes_to(sink, token, accepted=True):
    records = sink.accepted() if accepted else sink.all()
    return [r for r in records if (r["notification"].get("tokens") or [None])[0] == token]


def parse_time(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def job_for(postgres, database, device, kind=None):
    found = [j for j in jobs(postgres, database) if j["device"] == device and (kind is None or j["kind"] == kind)]
    return found[-1] if found else None


async def send_message(client, to, text):
    reply = await client.request({"type": "message.send", "clientMessageId": str(uuid.uuid4()), "to": to, "text": text})
    check(reply.get("type") == "ok", f"message.send: {reply}")
    return reply


async def main():
    postgres = TempPostgres()
    database = "push_delivery"
    url = postgres.create_database(database)
    sink = GorushSink()
    server = ParleyServer(url, extra=[
        "--push-gateway-url", sink.url, "--push-bundle-id", "com.example.chat", "--push-title-field", "screenName",
        "--push-collapse-window", "500ms", "--push-backoff-base", f"{int(BACKOFF_BASE * 1000)}ms", "--push-backoff-max", "2s",
        "--push-max-attempts", "7", "--push-poll-interval", "200ms", "--push-request-timeout", "2s",
        "--call-reach-timeout", "20s"]).start()
    users = create_users(postgres, database, "pu", 8)
    (alice, alice_token), (bob, _), (carol, carol_token), (dave, _), (erin, _), (frank, _), (gina, _), (hank, hank_token) = users
    postgres.psql(database, f"""UPDATE users SET data = '{{"screenName":"Alice Liddell"}}' WHERE object_id = '{alice}'""")
    add_installation(postgres, database, "bob-phone", bob, token="bob-apns", voip_token="bob-voip")
    add_installation(postgres, database, "carol-phone", carol, token="carol-apns", voip_token="carol-voip")
    add_installation(postgres, database, "dave-phone", dave, voip_token="dave-voip")
    add_installation(postgres, database, "erin-pixel", erin, device_type="android", token="erin-fcm")
    add_installation(postgres, database, "frank-phone", frank, token="frank-apns")
    add_installation(postgres, database, "gina-phone", gina, token="gina-apns", voip_token="gina-voip")
    a1 = await CallClient.connect(server.ws_url, alice_token, "alice-phone")
    c1 = await CallClient.connect(server.ws_url, carol_token, "carol-phone")

    # 1. Offline recipient: a burst of 30 messages from Alice and 2 from Carol → one push per conversation.
    await asyncio.gather(*[send_message(a1, [bob], f"hello {i}") for i in range(30)],
                         *[send_message(c1, [bob], f"carol {i}") for i in range(2)])
    wait_for("both conversations are pushed to bob", lambda: len(pushes_to(sink, "bob-apns")) >= 2)
    # Every job was written with its message (acknowledged above); once none is left to send, no other push can come.
    wait_for("bob's jobs are all sent", lambda: (bobs := [j for j in jobs(postgres, database) if j["device"] == "bob-phone"])
             and all(j["state"] == "sent" for j in bobs))
    bob_pushes = pushes_to(sink, "bob-apns")
    check(len(bob_pushes) == 2, f"one push per conversation, got {[p['notification'] for p in bob_pushes]}")
    by_sender = {p["notification"]["data"]["from"]: p["notification"] for p in bob_pushes}
    check(by_sender[alice]["title"] == "Alice Liddell" and by_sender[alice]["data"]["count"] == 30, by_sender[alice])
    check(by_sender[alice]["message"].startswith("hello "), by_sender[alice])
    check(by_sender[alice]["push_type"] == "alert" and by_sender[alice]["topic"] == "com.example.chat", by_sender[alice])
    check(by_sender[carol]["data"]["count"] == 2 and by_sender[carol]["title"] == "puuser3", by_sender[carol])
    check(by_sender[alice]["collapse_id"] != by_sender[carol]["collapse_id"], "conversations collapse separately")
    log("offline recipient: one collapsed alert per conversation burst: ok")

    # 2. Online recipient: Carol is connected and gets the messages live, no push.
    for i in range(5):
        await send_message(a1, [carol], f"live {i}")
    for i in range(5):
        event = await c1.next_event("message")
        check(event["text"] == f"live {i}", event)
    # A job would have been written with each message (in its transaction), and only jobs are pushed.
    check(job_for(postgres, database, "carol-phone") is None, "no job for a connected device")
    check(not pushes_to(sink, "carol-apns", accepted=False), "no push for a connected device")
    log("online recipient: no push: ok")

    # 3. Offline callee: one VoIP push with the call fields, at once.
    call_id = new_call_id()
    started = time.time()
    reply = await a1.call("invite", call_id, to=bob, video=True, sdp="v=0 offer", headers={"name": "Alice", "room": "7"})
    check(reply.get("type") == "ok", f"invite: {reply}")
    voip = wait_for("bob's VoIP push", lambda: pushes_to(sink, "bob-voip"))
    check(time.time() - started < 2.0, "the VoIP push goes out at once")
    push = voip[0]["notification"]
    check(push["push_type"] == "voip" and push["topic"] == "com.example.chat.voip" and push["priority"] == "high", push)
    data = push["data"]
    check(data["type"] == "call" and data["callId"] == call_id and data["from"] == alice and data["video"] is True, data)
    check(data["headers"] == {"name": "Alice", "room": "7"} and data["callerName"] == "Alice Liddell", data)
    check(abs(push["expiration"] - parse_time(data["expiresAt"])) < 1.5 and push["expiration"] > time.time(), push)
    check((await a1.call("hangup", call_id)).get("type") == "ok", "hang up")
    await a1.next_event("call.ended", call_id)
    wait_for("bob's call job is sent", lambda: (job_for(postgres, database, "bob-phone", "call") or {}).get("state") == "sent")
    check(len(pushes_to(sink, "bob-voip", accepted=False)) == 1, "exactly one VoIP push")
    log("offline callee: one VoIP push with callId, caller, video, headers: ok")

    # 4. A call canceled before its push is sent: the gateway fails, the caller hangs up, nothing is delivered.
    sink.configure(fail_all=True)
    call_id = new_call_id()
    check((await a1.call("invite", call_id, to=dave, sdp="v=0 offer")).get("type") == "ok", "invite dave")
    wait_for("the first (failing) attempt", lambda: pushes_to(sink, "dave-voip", accepted=False))
    check((await a1.call("hangup", call_id)).get("type") == "ok", "hang up before the push")
    await a1.next_event("call.ended", call_id)
    wait_for("dave's job is canceled", lambda: (job_for(postgres, database, "dave-phone") or {}).get("state") == "canceled")
    sink.configure(fail_all=False)
    attempts = len(pushes_to(sink, "dave-voip", accepted=False))
    time.sleep(1.5)
    check(not pushes_to(sink, "dave-voip"), "no push delivered for a canceled call")
    check(len(pushes_to(sink, "dave-voip", accepted=False)) == attempts, "no attempt after the cancel")
    log("call canceled before its push was sent: none sent: ok")

    # 5. Gateway down for 5 attempts, then up: delivered once; backoff in the attempt timestamps.
    sink.configure(fail_next=5)
    await send_message(a1, [erin], "are you there?")
    wait_for("erin's push", lambda: pushes_to(sink, "erin-fcm"), timeout=30)
    wait_for("erin's job is sent", lambda: (job_for(postgres, database, "erin-pixel") or {}).get("state") == "sent")
    check(len(pushes_to(sink, "erin-fcm")) == 1, "delivered exactly once")
    check(len(pushes_to(sink, "erin-fcm", accepted=False)) == 6, "5 failed attempts and the good one")
    job = job_for(postgres, database, "erin-pixel")
    check(job["state"] == "sent" and job["attempts"] == 6, job)
    check([entry["result"] for entry in job["log"]] == ["retry"] * 5 + ["sent"], job["log"])
    times = [parse_time(entry["at"]) for entry in job["log"]]
    gaps = [b - a for a, b in zip(times, times[1:])]
    for index, gap in enumerate(gaps):
        nominal = min(BACKOFF_BASE * 2 ** index, 2.0)
        check(gap >= nominal / 2 - 0.01, f"gap {index} is {gap:.3f} s, backoff at least {nominal / 2:.3f} s: {gaps}")
    check(gaps[-1] > gaps[0] * 2.5, f"the gaps grow: {gaps}")
    push = pushes_to(sink, "erin-fcm")[0]["notification"]
    check(push["platform"] == 2 and push["data"]["count"] == "1", push)
    log(f"gateway down for 5 attempts then up: sent once, gaps {[round(g, 2) for g in gaps]} s: ok")

    # 6. Gateway down past the attempts: dead; `parley push retry --dead` sends it.
    sink.configure(fail_all=True)
    await send_message(a1, [frank], "hello frank")
    wait_for("frank's job is dead", lambda: (job_for(postgres, database, "frank-phone") or {}).get("state") == "dead", timeout=30)
    check(len(pushes_to(sink, "frank-apns", accepted=False)) == 7, "seven attempts, then none")
    code, out, err = parley_push(url, "list", "--state", "dead", "--json")
    check(code == 0, f"push list: {err}")
    listed = json.loads(out)
    check(len(listed) == 1 and listed[0]["deviceId"] == "frank-phone" and listed[0]["attempts"] == 7, listed)
    check(len(listed[0]["attemptLog"]) == 7 and listed[0]["attemptLog"][-1]["result"] == "dead", listed[0]["attemptLog"])
    sink.configure(fail_all=False)
    code, out, err = parley_push(url, "retry", "--dead")
    check(code == 0 and "retrying 1 job" in out, f"push retry --dead: {out} {err}")
    wait_for("frank's push after the retry", lambda: pushes_to(sink, "frank-apns"), timeout=10)
    check((job_for(postgres, database, "frank-phone") or {}).get("state") == "sent", "sent after the retry")
    code, out, err = parley_push(url, "list")
    check(code == 0 and "frank-phone" in out and "ATTEMPTS" in out, out + err)
    code, _, err = parley_push(url, "retry", "999999")
    check(code == 1 and "no push job 999999" in err, err)
    log("dead after 7 attempts, parley push retry --dead resends: ok")

    # 7. A rejected token is removed from its installation.
    sink.configure(reject={"gina-apns": "BadDeviceToken"})
    await send_message(a1, [gina], "hello gina")
    wait_for("gina's job is rejected", lambda: (job_for(postgres, database, "gina-phone") or {}).get("state") == "rejected")
    tokens = postgres.psql(database, "SELECT coalesce(device_token, 'NULL') || ' ' || coalesce(voip_device_token, 'NULL') "
                                     "FROM installations WHERE installation_id = 'gina-phone'")
    check(tokens == "NULL gina-voip", f"the rejected token is removed, the other kept: {tokens}")
    log("rejected token removed from its installation: ok")

    # 8. An installation registered through the Parse API (linked to the session's user) gets pushes.
    request = urllib.request.Request(server.http_url + "/parse/installations", method="POST", data=json.dumps({
        "installationId": "hank-phone", "deviceType": "ios", "deviceToken": "hank-apns", "voipDeviceToken": "hank-voip"}).encode(),
        headers={"Content-Type": "application/json", "X-Parse-Application-Id": "parley", "X-Parse-Session-Token": hank_token})
    with urllib.request.urlopen(request, timeout=10) as response:
        check(response.status == 201, f"installation created: {response.status}")
    # Any deviceType Parse accepts is stored; only ios and android installations get pushes.
    for device, device_type in (("hank-mac", "osx"), ("hank-web", "web"), ("hank-board", "embedded")):
        request = urllib.request.Request(server.http_url + "/parse/installations", method="POST", data=json.dumps({
            "installationId": device, "deviceType": device_type, "deviceToken": device + "-token"}).encode(),
            headers={"Content-Type": "application/json", "X-Parse-Application-Id": "parley", "X-Parse-Session-Token": hank_token})
        with urllib.request.urlopen(request, timeout=10) as response:
            check(response.status == 201, f"{device_type} installation created: {response.status}")
    stored = postgres.psql(database, "SELECT string_agg(device_type, ',' ORDER BY installation_id) FROM installations "
                                     "WHERE installation_id IN ('hank-mac', 'hank-web', 'hank-board')")
    check(stored == "embedded,osx,web", f"device types stored: {stored}")
    await send_message(a1, [hank], "hello hank")
    wait_for("hank's push", lambda: pushes_to(sink, "hank-apns"))
    for device in ("hank-mac", "hank-web", "hank-board"):
        check(job_for(postgres, database, device) is None and not pushes_to(sink, device + "-token", accepted=False)
              and not pushes_to(sink, device + "-token"), f"no push to the {device} installation")
    log("installation registered over /parse/installations gets pushes; osx, web and embedded ones are stored and get none: ok")

    # 9. Metrics.
    check(metric(server, "parley_push_sent_total") >= 5, "sent total")
    check(metric(server, "parley_push_dead_total") == 1, "dead total")
    check(metric(server, "parley_push_failed_total") >= 12, "failed total")
    check(metric(server, "parley_push_rejected_total") == 1, "rejected total")
    check(metric(server, "parley_push_gateway_latency_seconds_count") >= 10, "gateway latency histogram")
    check(metric(server, "parley_push_queue_depth") is not None, "queue depth gauge")
    log("push metrics in /metrics: ok")

    await a1.close()
    await c1.close()
    server.stop()
    sink.close()


if __name__ == "__main__":
    run(main)
