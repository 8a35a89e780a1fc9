#!/usr/bin/env python3
"""Crash safety: a client sends 2,000 messages and records every `ok`; the server is killed with
SIGKILL in the middle; after a restart the sender re-sends what was not acknowledged (same
clientMessageId) and the recipient, reconnecting with resumeAfter, must receive every
acknowledged message — none missing, in increasing seq order, and no message twice after
deduplication by messageId (each clientMessageId maps to exactly one messageId)."""
import asyncio
import json
import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import check, create_users, log, run, run_on_nodes  # noqa: E402

import websockets  # noqa: E402

TOTAL = 2000
KILL_AFTER = 700
WINDOW = 64


async def hello(url, token, device, resume_after=0):
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        try:
            ws = await websockets.connect(url, ping_interval=None, max_size=2 ** 20, open_timeout=5)
            await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device, "resumeAfter": resume_after}))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
            check(welcome["type"] == "welcome", welcome)
            return ws, welcome
        except (OSError, websockets.WebSocketException, asyncio.TimeoutError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


class Receiver:
    """Keeps a device connected across the crash; dedupes by messageId; acks as it goes."""

    def __init__(self, url, token, user):
        self.url, self.token, self.user = url, token, user
        self.by_message = {}
        self.duplicates = 0
        self.last_seq = 0
        self.connections = 0
        self.order_errors = []

    async def run(self, done):
        while not done.is_set():
            ws, welcome = await hello(self.url, self.token, "receiver-phone", self.last_seq)
            self.connections += 1
            session_last = self.last_seq
            try:
                async for raw in ws:
                    event = json.loads(raw)
                    if event.get("type") != "message":
                        continue
                    if event["seq"] <= session_last:
                        self.order_errors.append((session_last, event["seq"]))
                    session_last = event["seq"]
                    if event["messageId"] in self.by_message:
                        self.duplicates += 1
                    self.by_message[event["messageId"]] = event["text"]
                    self.last_seq = event["seq"]
                    if event["seq"] % 50 == 0:
                        await ws.send(json.dumps({"type": "ack", "upTo": event["seq"]}))
                    if done.is_set():
                        break
            except websockets.ConnectionClosed:
                pass
            finally:
                await ws.close()


async def send_all(url, token, receiver_id, acknowledged, kill_at, server, client_ids, stats):
    """Sends every client id in `client_ids` (window of WINDOW), recording oks; kills the server
    after `kill_at` oks if given. Returns when all got an answer or the connection died."""
    ws, _ = await hello(url, token, "sender-phone")
    outstanding = {}
    queue = list(client_ids)
    next_request = 0
    killed = False
    try:
        while queue or outstanding:
            while queue and len(outstanding) < WINDOW:
                client_id = queue.pop(0)
                next_request += 1
                outstanding[next_request] = client_id
                await ws.send(json.dumps({"type": "message.send", "id": next_request, "clientMessageId": client_id,
                                          "to": [receiver_id], "text": client_id}))
            reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if reply.get("type") not in ("ok", "error") or reply.get("re") not in outstanding:
                continue
            client_id = outstanding.pop(reply["re"])
            if reply["type"] == "ok":
                previous = acknowledged.get(client_id)
                check(previous is None or previous == reply["messageId"],
                      f"{client_id} acknowledged as {previous} and {reply['messageId']}")
                acknowledged[client_id] = reply["messageId"]
                if reply.get("duplicate"):
                    stats["duplicates"] = stats.get("duplicates", 0) + 1
            else:
                queue.append(client_id)  # retried (e.g. unavailable while the database reconnects)
            if kill_at is not None and not killed and len(acknowledged) >= kill_at:
                log(f"SIGKILL with {len(acknowledged)} acknowledged and {len(outstanding)} in flight")
                server.kill(signal.SIGKILL)
                killed = True
    except (websockets.ConnectionClosed, OSError):
        check(killed or kill_at is None, "sender connection dropped before the kill")
    finally:
        await ws.close()
    return killed


async def main():
    await run_on_nodes(scenario, "rt", extra=["--realtime-send-rate", "100000", "--realtime-send-burst", "100000"])


async def scenario(postgres, server):
    (sender, sender_token), (receiver, receiver_token) = create_users(postgres, "rt", "c", 2)
    client_ids = [f"msg-{n:05d}" for n in range(TOTAL)]
    acknowledged = {}
    done = asyncio.Event()
    rx = Receiver(server.ws_url, receiver_token, receiver)
    receiver_task = asyncio.create_task(rx.run(done))
    while rx.connections == 0:  # the receiver's welcome came: it is connected before the burst
        await asyncio.sleep(0.01)

    stats = {}
    killed = await send_all(server.ws_url, sender_token, receiver, acknowledged, KILL_AFTER, server, client_ids, stats)
    check(killed, "the server was not killed")
    before_restart = dict(acknowledged)
    log(f"{len(before_restart)} messages acknowledged before the crash; restarting")
    server.start()
    missing = [client_id for client_id in client_ids if client_id not in acknowledged]
    await send_all(server.ws_url, sender_token, receiver, acknowledged, None, server, missing, stats)
    check(len(acknowledged) == TOTAL, f"{len(acknowledged)} of {TOTAL} acknowledged after the restart")
    resent_duplicates = stats.get("duplicates", 0)
    log(f"all {TOTAL} acknowledged ({len(missing)} re-sent after the restart)")

    wanted = set(acknowledged.values())
    deadline = asyncio.get_running_loop().time() + 120
    while not wanted.issubset(rx.by_message) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
    done.set()
    receiver_task.cancel()
    lost = [client_id for client_id, message_id in before_restart.items() if message_id not in rx.by_message]
    check(not lost, f"{len(lost)} messages acknowledged before the crash were lost: {lost[:10]}")
    check(wanted.issubset(rx.by_message), f"{len(wanted - set(rx.by_message))} acknowledged messages not received")
    texts = list(rx.by_message.values())
    check(len(texts) == len(set(texts)), "a clientMessageId was delivered under two messageIds")
    check(set(texts) == set(client_ids), "the receiver got messages nobody sent")
    check(not rx.order_errors, f"seq went backwards within a connection: {rx.order_errors[:5]}")
    log(f"receiver: {len(rx.by_message)} distinct messages over {rx.connections} connections, "
        f"{rx.duplicates} redeliveries deduped by messageId; nothing lost; {resent_duplicates} re-sends were committed before the crash (answered as duplicates)")
    log("crash safety: all checks passed")


if __name__ == "__main__":
    run(main)
