#!/usr/bin/env python3
"""Abuse tests of installations, devices, sockets, presence and typing, over real sockets against
`parley serve` and a real PostgreSQL (docs/rest-api.md "Installations", docs/realtime-protocol.md).

- Installation takeover: another user's session, no session and an anonymous upsert by
  installationId cannot change an installation linked to a user (its tokens stay, its user
  stays); its own user's session and the master key can; tokens are returned to nobody else.
- Device limit: installations of one user past --realtime-max-devices are refused (119), and the
  user has no more devices than the limit.
- Session expiry: with --session-lifetime 2s a socket opened on a fresh session is closed with
  4007 when the session expires, and nothing it sends afterwards is delivered.
- Presence and typing (default scope `contacts`): a stranger's presence is refused
  (`failed` / `not_a_contact`) and its typing dropped; a user who sent the subscriber a message
  is a contact; with --realtime-presence-scope everyone both reach anyone.
"""
import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import Client, ParleyServer, TempPostgres, check, create_users, log, run  # noqa: E402

MASTER_KEY = "security-master-key"
DATABASE = "rtsec"


def parse(server, method, path, body=None, token=None, master=False, installation=None):
    """A Parse REST request; returns (status, JSON body)."""
    headers = {"X-Parse-Application-Id": "parley", "Content-Type": "application/json"}
    if token:
        headers["X-Parse-Session-Token"] = token
    if master:
        headers["X-Parse-Master-Key"] = MASTER_KEY
    if installation:
        headers["X-Parse-Installation-Id"] = installation
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.http_url + "/parse" + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def installation_row(postgres, installation_id):
    row = postgres.psql(DATABASE, f"SELECT coalesce(user_id, ''), coalesce(device_token, ''), coalesce(voip_device_token, '') "
                                  f"FROM installations WHERE installation_id = '{installation_id}'")
    return tuple(row.split("|"))


def check_installation_takeover(postgres, server, users):
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    install = "inst-alice-0001"
    status, created = parse(server, "POST", "/installations", {
        "installationId": install, "deviceType": "ios", "deviceToken": "apns-alice", "voipDeviceToken": "voip-alice"}, token=alice_token)
    check(status == 201, f"alice's installation: {status} {created}")
    object_id = created["objectId"]
    original = (alice, "apns-alice", "voip-alice")
    check(installation_row(postgres, install) == original, "the installation is alice's")

    # Another user's session: PUT and upsert by installationId.
    status, body = parse(server, "PUT", f"/installations/{object_id}", {"deviceToken": "apns-bob", "voipDeviceToken": "voip-bob"},
                         token=bob_token)
    log(f"bob PUT alice's installation: {status} {body}")
    check(status == 404 and body.get("code") == 101, f"another user's PUT must be refused with 101, got {status} {body}")
    check(installation_row(postgres, install) == original, f"another user's PUT changed it: {installation_row(postgres, install)}")
    status, body = parse(server, "POST", "/installations", {
        "installationId": install, "deviceType": "ios", "deviceToken": "apns-bob", "voipDeviceToken": "voip-bob"}, token=bob_token)
    log(f"bob upsert of alice's installationId: {status} {body}")
    check(status == 404 and body.get("code") == 101, f"another user's upsert must be refused with 101, got {status} {body}")
    check(installation_row(postgres, install) == original, f"another user's upsert changed it: {installation_row(postgres, install)}")

    # No session: PUT, upsert by installationId in the body, and by the installation header.
    status, body = parse(server, "PUT", f"/installations/{object_id}", {"deviceToken": "apns-anon"})
    log(f"anonymous PUT: {status} {body}")
    check(status == 404 and body.get("code") == 101, f"an anonymous PUT must be refused with 101, got {status} {body}")
    status, body = parse(server, "POST", "/installations", {"installationId": install, "deviceType": "ios", "deviceToken": "apns-anon"})
    log(f"anonymous upsert: {status} {body}")
    check(status == 404 and body.get("code") == 101, f"an anonymous upsert must be refused with 101, got {status} {body}")
    status, body = parse(server, "POST", "/installations", {"deviceType": "ios", "voipDeviceToken": "voip-anon"}, installation=install)
    check(status == 404 and body.get("code") == 101, f"an anonymous upsert by header must be refused with 101, got {status} {body}")
    check(installation_row(postgres, install) == original, f"an anonymous write changed it: {installation_row(postgres, install)}")

    # Tokens are returned to nobody else.
    for label, kwargs in (("bob", {"token": bob_token}), ("no session", {})):
        status, body = parse(server, "GET", f"/installations/{object_id}", **kwargs)
        check(status == 200, f"GET as {label}: {status} {body}")
        check("deviceToken" not in body and "voipDeviceToken" not in body, f"GET as {label} returned tokens: {body}")
        status, body = parse(server, "GET", f"/classes/_Installation/{object_id}", **kwargs)
        check(status == 200 and "deviceToken" not in body and "voipDeviceToken" not in body, f"GET /classes as {label}: {body}")
        status, body = parse(server, "GET", "/installations", **kwargs)
        check(status == 400 and body.get("code") == 119, f"find as {label} must be refused: {status} {body}")
    status, body = parse(server, "GET", f"/installations/{object_id}", token=alice_token)
    check(body.get("deviceToken") == "apns-alice" and body.get("voipDeviceToken") == "voip-alice", f"alice reads her tokens: {body}")

    # Its own user and the master key may change it.
    status, body = parse(server, "PUT", f"/installations/{object_id}", {"deviceToken": "apns-alice-2"}, token=alice_token)
    check(status == 200, f"alice's own PUT: {status} {body}")
    status, body = parse(server, "POST", "/installations", {"installationId": install, "deviceType": "ios", "voipDeviceToken": "voip-alice-2"},
                         token=alice_token)
    check(status == 200, f"alice's own upsert: {status} {body}")
    check(installation_row(postgres, install) == (alice, "apns-alice-2", "voip-alice-2"), f"alice's changes: {installation_row(postgres, install)}")
    status, body = parse(server, "PUT", f"/installations/{object_id}", {"deviceToken": "apns-master"}, master=True)
    check(status == 200, f"master PUT: {status} {body}")
    status, body = parse(server, "POST", "/installations", {"installationId": install, "deviceType": "ios", "voipDeviceToken": "voip-master"},
                         master=True)
    check(status == 200, f"master upsert: {status} {body}")
    check(installation_row(postgres, install) == (alice, "apns-master", "voip-master"), f"master's changes: {installation_row(postgres, install)}")
    status, body = parse(server, "GET", f"/installations/{object_id}", master=True)
    check(body.get("deviceToken") == "apns-master", f"master reads the tokens: {body}")
    status, body = parse(server, "GET", "/installations", master=True)
    check(status == 200 and any(r.get("deviceToken") == "apns-master" for r in body["results"]), f"master's find: {body}")

    # An installation no user is linked to yet is still anyone's to save, and links to its first user.
    status, body = parse(server, "POST", "/installations", {"installationId": "inst-free-0001", "deviceType": "android", "deviceToken": "t1"})
    check(status == 201, f"anonymous installation: {status} {body}")
    status, body = parse(server, "POST", "/installations", {"installationId": "inst-free-0001", "deviceType": "android", "deviceToken": "t2"})
    check(status == 200, f"anonymous update of an unlinked installation: {status} {body}")
    status, body = parse(server, "POST", "/installations", {"installationId": "inst-free-0001", "deviceType": "android", "deviceToken": "t3"},
                         token=bob_token)
    check(status == 200 and installation_row(postgres, "inst-free-0001") == (bob, "t3", ""), f"bob links the free installation: {body}")
    log("installation takeover: refused for other users, no session and anonymous upserts; tokens hidden")


def check_device_limit(postgres, server, users):
    carol, carol_token = users[2]
    statuses = []
    for index in range(25):
        status, body = parse(server, "POST", "/installations",
                             {"installationId": f"flood-{index:04d}", "deviceType": "android", "deviceToken": f"tok-{index}"}, token=carol_token)
        statuses.append((status, body.get("code")))
    devices = int(postgres.psql(DATABASE, f"SELECT count(*) FROM rt_devices WHERE user_id = '{carol}'"))
    log(f"device flood through installations: {devices} devices; answers {statuses[18:]}")
    check(devices == 20, f"carol has {devices} devices, the limit is 20")
    check(statuses[:20] == [(201, None)] * 20, f"the first 20 installations: {statuses[:20]}")
    check(all(s == (400, 119) for s in statuses[20:]), f"installations past the limit must be refused with 119: {statuses[20:]}")
    linked = int(postgres.psql(DATABASE, f"SELECT count(*) FROM installations WHERE user_id = '{carol}'"))
    check(linked == 20, f"{linked} installations linked to carol")


async def check_session_expiry(postgres, server, users):
    dave, dave_token = users[3]
    status, signup = parse(server, "POST", "/users", {"username": "short-lived", "password": "correct horse"})
    check(status == 201, f"signup: {status} {signup}")
    token, user = signup["sessionToken"], signup["objectId"]
    expires = postgres.psql(DATABASE, f"SELECT extract(epoch FROM expires_at - now()) FROM sessions WHERE token = '{token}'")
    log(f"session expires in {float(expires):.1f} s")
    receiver = await Client.connect(server.ws_url, dave_token, "dave-phone")
    sender = await Client.connect(server.ws_url, token, "short-phone")
    reply = await sender.send_message([dave], "before expiry")
    check(reply["type"] == "ok", f"send before expiry: {reply}")
    check((await receiver.next_event("message"))["text"] == "before expiry", "delivered before expiry")
    started = time.monotonic()
    try:
        await asyncio.wait_for(sender.closed, 10)
    except asyncio.TimeoutError:
        late = await sender.send_message([dave], "after expiry")
        raise AssertionError(f"the socket is still open 10 s after the session expired; a send answered {late}") from None
    code = sender.ws.close_code
    log(f"socket closed {time.monotonic() - started:.1f} s after the first send, code {code} ({sender.ws.close_reason})")
    check(code == 4007, f"close code {code}, expected 4007")
    try:
        await sender.ws.send(json.dumps({"type": "message.send", "id": 99, "clientMessageId": "late", "to": [dave], "text": "after expiry"}))
    except Exception:  # noqa: BLE001 - a closed socket refuses the send, which is the point
        pass
    # A REST send with the expired token is refused, and nothing from the expired session arrived.
    status, body = server.request("POST", "/v1/messages", {"clientMessageId": "late-rest", "to": [dave], "text": "after expiry"}, token=token)
    check(status == 401, f"REST send with the expired token: {status} {body}")
    rows = postgres.psql(DATABASE, f"SELECT count(*) FROM rt_messages WHERE sender = '{user}'")
    check(rows == "1", f"{rows} messages stored from the expired session")
    await receiver.close()


async def check_presence_and_typing(postgres, servers, users, scope):
    (paul, paul_token), (sam, sam_token), (kim, kim_token) = users[4], users[5], users[6]
    server = servers[0]
    watcher = await Client.connect(server.ws_url, paul_token, f"paul-{scope}")
    contact = await Client.connect(server.ws_url, kim_token, f"kim-{scope}")
    reply = await contact.send_message([paul], f"hi paul ({scope})")
    check(reply["type"] == "ok", f"kim's message: {reply}")
    await watcher.next_event("message")

    reply = await watcher.request({"type": "presence.subscribe", "users": [sam, kim]})
    log(f"{scope}: paul subscribes to a stranger and a contact: {reply}")
    if scope == "contacts":
        check(reply["type"] == "ok" and reply.get("failed") == [{"userId": sam, "reason": "not_a_contact"}],
              f"the stranger's presence must be refused: {reply}")
    else:
        check(reply["type"] == "ok" and not reply.get("failed"), f"everyone: {reply}")
    first = await watcher.next_event("presence")
    presences = [first]
    if scope != "contacts":
        presences.append(await watcher.next_event("presence"))
    check(sorted(p["userId"] for p in presences) == sorted([kim] if scope == "contacts" else [sam, kim]), f"snapshot {presences}")

    # The stranger comes online and types; then the contact types and reconnects.
    stranger = await Client.connect(server.ws_url, sam_token, f"sam-{scope}")
    reply = await stranger.request({"type": "typing", "to": paul, "active": True})
    check(reply["type"] == "ok", f"the stranger's typing is answered like any other: {reply}")
    reply = await contact.request({"type": "typing", "to": paul, "active": True})
    check(reply["type"] == "ok", f"kim's typing: {reply}")
    await contact.close()
    seen = []
    while True:
        event = await watcher.next_event()
        seen.append(event)
        if event.get("type") == "presence" and event.get("userId") == kim and not event["online"]:
            break
    log(f"{scope}: paul then saw {[(e['type'], e.get('userId') or e.get('from')) for e in seen]}")
    from_stranger = [e for e in seen if e.get("userId") == sam or e.get("from") == sam]
    if scope == "contacts":
        check(not from_stranger, f"the stranger's presence or typing reached paul: {from_stranger}")
    else:
        check({e["type"] for e in from_stranger} == {"presence", "typing"}, f"everyone: the stranger's presence and typing: {seen}")
    check(any(e["type"] == "typing" and e["from"] == kim for e in seen), f"the contact's typing must arrive: {seen}")

    # Sending a message makes the sender a contact of its recipient.
    if scope == "contacts":
        reply = await stranger.send_message([paul], "now we talk")
        check(reply["type"] == "ok", f"sam's message: {reply}")
        await watcher.next_event("message")
        reply = await watcher.request({"type": "presence.subscribe", "users": [sam]})
        check(reply["type"] == "ok" and not reply.get("failed"), f"after sam's message he is a contact: {reply}")
        check((await watcher.next_event("presence"))["userId"] == sam, "sam's presence")
        await stranger.request({"type": "typing", "to": paul, "active": False})
        event = await watcher.next_event("typing")
        check(event["from"] == sam and event["active"] is False, f"sam's typing: {event}")
        # Paul never wrote to sam: paul's typing does not reach sam.
        await watcher.request({"type": "typing", "to": sam, "active": True})
        await stranger.request({"type": "presence.subscribe", "users": [paul]})
        queued = [stranger.events.get_nowait() for _ in range(stranger.events.qsize())]
        check(all(e["type"] != "typing" for e in queued), f"paul's typing reached sam: {queued}")
    await stranger.close()
    await watcher.close()


async def main():
    postgres = TempPostgres()
    servers = []
    try:
        url = postgres.create_database(DATABASE)
        server = ParleyServer(url, extra=["--master-key", MASTER_KEY, "--session-lifetime", "2s", "--password-ops-limit", "1",
                                          "--password-mem-limit", "1048576"]).start()
        servers.append(server)
        users = create_users(postgres, DATABASE, "sc", 8)
        try:
            check_installation_takeover(postgres, server, users)
            check_device_limit(postgres, server, users)
            await check_session_expiry(postgres, server, users)
            await check_presence_and_typing(postgres, [server], users, "contacts")
            everyone = ParleyServer(url, extra=["--realtime-presence-scope", "everyone"]).start()
            servers.append(everyone)
            await check_presence_and_typing(postgres, [everyone], create_users(postgres, DATABASE, "ev", 8), "everyone")
        except BaseException:
            for index, node in enumerate(servers):
                log(f"--- server {index} log\n" + node.log())
            raise
        log("realtime security: all checks passed")
    finally:
        for node in servers:
            node.stop()
        postgres.stop()


if __name__ == "__main__":
    run(main)
