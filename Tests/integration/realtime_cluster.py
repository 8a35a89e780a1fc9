#!/usr/bin/env python3
"""Two `parley serve` nodes on one PostgreSQL: an event committed on node A reaches a device
connected to node B at once (LISTEN/NOTIFY hint, the queue read from PostgreSQL), receipts flow
back, a device that reconnects to the other node replaces its old connection there (4001),
typing and presence cross nodes, and a message for a device whose node died waits in its queue."""
import asyncio
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import Client, check, create_users, log, run, run_on_nodes  # noqa: E402


async def main():
    await run_on_nodes(scenario, "rt", nodes=2)


async def scenario(postgres, node_a, node_b):
    (alice, alice_token), (bob, bob_token) = create_users(postgres, "rt", "n", 2)
    a1 = await Client.connect(node_a.ws_url, alice_token, "alice-phone")
    b1 = await Client.connect(node_b.ws_url, bob_token, "bob-phone")
    a2 = await Client.connect(node_b.ws_url, alice_token, "alice-tablet")
    # Both nodes' first heartbeats are in (each tells its node how many nodes run; cross-node presence
    # and typing need it).
    deadline = time.monotonic() + 10
    while postgres.psql("rt", "SELECT count(*) FROM rt_nodes") != "2":
        check(time.monotonic() < deadline, "both nodes heartbeat within 10 s")
        await asyncio.sleep(0.05)

    # Sent on A, delivered live on B: to the recipient and to the sender's other device.
    for n in range(20):
        ok = await a1.send_message([bob], f"cross {n}")
        check(ok["type"] == "ok", ok)
    seqs = []
    for n in range(20):
        event = await b1.next_event("message", timeout=5)
        check(event["text"] == f"cross {n}", event)
        seqs.append(event["seq"])
    check(seqs == list(range(1, 21)), seqs)
    for n in range(20):
        copy = await a2.next_event("message", timeout=5)
        check(copy["text"] == f"cross {n}", copy)
    log("node A → device on node B, in order: ok")

    # Receipts committed on B reach the sender's device on A.
    await b1.ack(20)
    receipts = [await a1.next_event("receipt", timeout=5) for _ in range(20)]
    check(all(r["kind"] == "delivered" and r["userId"] == bob for r in receipts), receipts)
    log("receipts from node B → device on node A: ok")

    # Typing and presence across nodes (bob writes to alice first: presence and typing go to contacts).
    reply = await b1.send_message([alice], "hi alice")
    check(reply["type"] == "ok", reply)
    watch = await a1.request({"type": "presence.subscribe", "users": [bob]})
    check(watch["type"] == "ok", watch)
    state = await a1.next_event("presence", timeout=5)
    check(state["online"] is True, f"bob is online on node B: {state}")
    await b1.ws.send('{"type":"typing","to":"%s","active":true}' % alice)
    typing = await a1.next_event("typing", timeout=5)
    check(typing["from"] == bob, typing)
    log("typing and presence across nodes: ok")

    # Bob's phone reconnects through node A: its connection on node B is closed with 4001.
    b1_again = await Client.connect(node_a.ws_url, bob_token, "bob-phone", resume_after=20)
    await asyncio.wait_for(b1.closed, 10)
    check(b1.ws.close_code == 4001, f"old connection on node B closed with {b1.ws.close_code}")
    ok = await a2.send_message([bob], "after the move")  # sent on node B, device now on node A
    event = await b1_again.next_event("message", timeout=5)
    check(event["text"] == "after the move" and event["seq"] == 21, event)
    log("device moved from node B to node A; old connection closed with 4001: ok")

    # Node A dies with Bob connected there; a message sent on node B waits in Bob's queue.
    node_a.kill(signal.SIGKILL)
    ok = await a2.send_message([bob], "while your node is down")
    check(ok["type"] == "ok", ok)
    b1_on_b = await Client.connect(node_b.ws_url, bob_token, "bob-phone", resume_after=21)
    event = await b1_on_b.next_event("message", timeout=5)
    check(event["text"] == "while your node is down" and event["seq"] == 22, event)
    log("node died: the message waited in the queue and arrived on reconnect to the other node: ok")

    for client in (a1, a2, b1_again, b1_on_b):
        await client.close()
    log("two nodes: all checks passed")


if __name__ == "__main__":
    run(main)
