#!/usr/bin/env python3
"""Two `parley serve` nodes on one PostgreSQL, failing (docs/realtime-protocol.md, "Several nodes"):

- presence *changes* cross nodes: a subscriber on node A sees a user on node B go offline and come
  back online, not only the first answer of its subscribe;
- a node whose LISTEN connection is killed (`pg_terminate_backend`, and the database refusing new
  connections for a while so the hint sent meanwhile is surely lost) re-reads its connections'
  queues once the listener is back: a message committed on node B meanwhile reaches the device on
  node A, which got nothing while its node was deaf;
- the node-death sweep: node A is SIGKILLed with a device connected there; until its heartbeat is
  stale (`--realtime-node-stale-after 11s`) the device looks connected, so a message to it makes
  no push job; after node B's sweep marks it offline, the next message becomes a push job, and the
  device gets both messages when it reconnects to node B.

`--only NAME` runs one section (presence, listener, death)."""
import asyncio
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import Client, check, create_users, log, run, run_on_nodes  # noqa: E402
from push_support import add_installation  # noqa: E402

DATABASE = "rtfail"
STALE_AFTER = 11  # seconds; must exceed the 10 s heartbeat interval


async def poll(what, probe, timeout=10.0, interval=0.05):
    """Returns the first truthy `probe()`; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        await asyncio.sleep(interval)


def tcp_ports_of(pid):
    """The local TCP ports of the sockets process `pid` holds (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def realtime_listener_pid(postgres, server):
    """The backend of `server`'s realtime LISTEN connection (the one LISTENing to parley_rt_presence)."""
    ports = ",".join(str(port) for port in tcp_ports_of(server.process.pid))
    rows = postgres.psql(DATABASE, f"SELECT pid FROM pg_stat_activity WHERE client_port IN ({ports}) "
                                   "AND query LIKE 'LISTEN %parley_rt_presence%'")
    pids = rows.split()
    check(len(pids) == 1, f"one realtime listener of node A among its connections: {pids}")
    return pids[0]


def device_node(postgres, user, device):
    return postgres.psql(DATABASE, f"SELECT coalesce(node_id, '') FROM rt_devices WHERE user_id = '{user}' AND device_id = '{device}'")


def push_jobs_for(postgres, device):
    return int(postgres.psql(DATABASE, f"SELECT count(*) FROM push_jobs WHERE device_id = '{device}'"))


async def presence_changes(postgres, node_a, node_b, users):
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    b1 = await Client.connect(node_b.ws_url, bob_token, "bob-laptop")
    check((await b1.send_message([alice], "so alice may watch bob"))["type"] == "ok", "send")
    a1 = await Client.connect(node_a.ws_url, alice_token, "alice-phone")
    reply = await a1.request({"type": "presence.subscribe", "users": [bob]})
    check(reply["type"] == "ok" and not reply.get("failed"), reply)
    state = await a1.next_event("presence")
    check(state["userId"] == bob and state["online"] is True, f"first answer: bob online on node B: {state}")
    await b1.close()
    gone = await a1.next_event("presence", timeout=10)
    check(gone["userId"] == bob and gone["online"] is False and gone["lastSeenAt"], f"bob left node B: {gone}")
    b1 = await Client.connect(node_b.ws_url, bob_token, "bob-laptop")
    back = await a1.next_event("presence", timeout=10)
    check(back["userId"] == bob and back["online"] is True, f"bob back on node B: {back}")
    log("presence changes cross nodes (offline, then online again on node B, seen on node A): ok")

    # The other way: node A started first, so it learns of node B from its own heartbeats (every 10 s),
    # yet alice's changes on node A must reach bob's subscription on node B from the start.
    check((await a1.send_message([bob], "so bob may watch alice"))["type"] == "ok", "send")
    reply = await b1.request({"type": "presence.subscribe", "users": [alice]})
    check(reply["type"] == "ok" and not reply.get("failed"), reply)
    state = await b1.next_event("presence")
    check(state["userId"] == alice and state["online"] is True, f"first answer: alice online on node A: {state}")
    await a1.close()
    gone = await b1.next_event("presence", timeout=5)
    check(gone["userId"] == alice and gone["online"] is False, f"alice left node A: {gone}")
    a1 = await Client.connect(node_a.ws_url, alice_token, "alice-phone")
    back = await b1.next_event("presence", timeout=5)
    check(back["userId"] == alice and back["online"] is True, f"alice back on node A: {back}")
    log("presence changes cross nodes the other way (node A, started first, to node B): ok")
    for client in (a1, b1):
        await client.close()


async def listener_killed(postgres, node_a, node_b, users):
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    b2 = await Client.connect(node_a.ws_url, bob_token, "bob-tablet")
    a2 = await Client.connect(node_b.ws_url, alice_token, "alice-laptop")
    ok = await a2.send_message([bob], "before the listener dies")
    check(ok["type"] == "ok", ok)
    check((await b2.next_event("message"))["text"] == "before the listener dies", "cross-node delivery works first")

    pid = realtime_listener_pid(postgres, node_a)
    postgres.psql("postgres", f"ALTER DATABASE {DATABASE} ALLOW_CONNECTIONS false")
    try:
        postgres.psql("postgres", f"SELECT pg_terminate_backend({pid})")
        await poll("node A's listener backend is gone",
                   lambda: postgres.psql("postgres", f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == "0")
        ok = await a2.send_message([bob], "while node A is deaf")
        check(ok["type"] == "ok", ok)
        # The hint went to a channel no one listened to: nothing reaches node A's device now.
        await b2.expect_no_event(1.0)
    finally:
        postgres.psql("postgres", f"ALTER DATABASE {DATABASE} ALLOW_CONNECTIONS true")
    event = await b2.next_event("message", timeout=15)
    check(event["text"] == "while node A is deaf", f"after the listener came back: {event}")
    ok = await a2.send_message([bob], "after the listener is back")
    check((await b2.next_event("message", timeout=5))["text"] == "after the listener is back", "live hints work again")
    log("LISTEN connection killed on node A: the message committed meanwhile arrived once it listened again: ok")
    for client in (a2, b2):
        await client.close()


async def node_death(postgres, node_a, node_b, users):
    (alice, alice_token), (bob, bob_token) = users[0], users[1]
    a2 = await Client.connect(node_b.ws_url, alice_token, "alice-laptop")
    add_installation(postgres, DATABASE, "bob-phone", bob, token="bob-apns")
    b3 = await Client.connect(node_a.ws_url, bob_token, "bob-phone")
    node_a_id = device_node(postgres, bob, "bob-phone")
    check(node_a_id, "bob's phone is recorded on node A")
    node_a.kill(signal.SIGKILL)
    killed_at = time.monotonic()
    b3.reader.cancel()

    ok = await a2.send_message([bob], "while node A is dead")
    check(ok["type"] == "ok", ok)
    check(device_node(postgres, bob, "bob-phone") == node_a_id and push_jobs_for(postgres, "bob-phone") == 0,
          "before the sweep the device looks connected: no push job")

    await poll("node B's sweep marks bob's phone offline", lambda: device_node(postgres, bob, "bob-phone") == "",
               timeout=STALE_AFTER + 25, interval=0.2)
    swept_after = time.monotonic() - killed_at
    check(postgres.psql(DATABASE, f"SELECT count(*) FROM rt_nodes WHERE node_id = '{node_a_id}'") == "0", "node A is removed")
    ok = await a2.send_message([bob], "after the sweep")
    check(ok["type"] == "ok", ok)
    check(push_jobs_for(postgres, "bob-phone") == 1, "the event for the swept device became a push job")
    b4 = await Client.connect(node_b.ws_url, bob_token, "bob-phone", resume_after=b3.welcome["lastSeq"])
    texts = [(await b4.next_event("message"))["text"] for _ in range(2)]
    check(texts == ["while node A is dead", "after the sweep"], texts)
    log(f"node death: swept {swept_after:.1f} s after SIGKILL, devices offline, the next event a push job, both delivered on node B: ok")
    for client in (a2, b4):
        await client.close()


SECTIONS = {"presence": presence_changes, "listener": listener_killed, "death": node_death}


async def scenario(postgres, node_a, node_b):
    users = create_users(postgres, DATABASE, "f", 2)
    # Both nodes' heartbeats are in: each node's first heartbeat tells it how many nodes run.
    await poll("both nodes heartbeat", lambda: postgres.psql(DATABASE, "SELECT count(*) FROM rt_nodes") == "2")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    for name, section in SECTIONS.items():
        if only in (None, name):
            await section(postgres, node_a, node_b, users)
    log("node failures: all checks passed")


async def main():
    await run_on_nodes(scenario, DATABASE, nodes=2, extra=["--realtime-node-stale-after", f"{STALE_AFTER}s"])


if __name__ == "__main__":
    run(main)
