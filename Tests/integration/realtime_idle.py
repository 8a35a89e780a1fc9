#!/usr/bin/env python3
# parley-test: run-alone (scripts/test.sh runs it by itself: it measures time, memory or many connections)
"""10,000 concurrent idle authenticated connections on one server stay connected and are pinged:
every connection says hello and gets welcome, then idles for several ping intervals while the
server's WebSocket pings keep it alive (the client never pings and never sends), and every
connection is still open and has answered at least two server pings at the end. (The server pings
a peer silent for the ping interval, then checks for the pong after the 10 s pong timeout, so with
a 3 s interval an idle connection is pinged about every 10 s.)"""
import asyncio
import json
import logging
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import ParleyServer, TempPostgres, check, create_users, log, raise_nofile, run  # noqa: E402

import websockets  # noqa: E402
from websockets.frames import Opcode  # noqa: E402

CONNECTIONS = int(os.environ.get("PARLEY_IDLE_CONNECTIONS", "10000"))
PING_INTERVAL = 3
IDLE_SECONDS = 25


class PingCounter(logging.LoggerAdapter):
    """A websockets logger that counts the pings received (from the debug frame log) and prints
    only warnings. websockets wraps it in its own adapter, which calls `log`."""

    def __init__(self):
        super().__init__(logging.getLogger("idle-client"), {})
        self.pings = 0

    def isEnabledFor(self, level):
        return True

    def log(self, level, msg, *args, **kwargs):
        if level == logging.DEBUG:
            if msg == "< %s" and args and getattr(args[0], "opcode", None) is Opcode.PING:
                self.pings += 1
        elif level >= logging.WARNING:
            super().log(level, msg, *args, **kwargs)


async def open_connection(url, token, index, gate):
    counter = PingCounter()
    async with gate:
        for attempt in range(5):
            try:
                ws = await websockets.connect(url, ping_interval=None, logger=counter, open_timeout=60, max_queue=4)
                break
            except OSError:
                if attempt == 4:
                    raise
                await asyncio.sleep(0.5)
        await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": f"idle-{index}", "resumeAfter": 0}))
        welcome = json.loads(await asyncio.wait_for(ws.recv(), 60))
        check(welcome["type"] == "welcome", welcome)
    return ws, counter


async def main():
    limits = raise_nofile(4 * CONNECTIONS + 1000)
    log(f"RLIMIT_NOFILE {limits}")
    postgres = TempPostgres()
    url = postgres.create_database("rt")
    server = ParleyServer(url, extra=["--realtime-ping-interval", f"{PING_INTERVAL}s"]).start()
    users = create_users(postgres, "rt", "i", CONNECTIONS)
    try:
        await scenario(server, users)
    except BaseException:
        log(server.log())
        raise
    finally:
        server.stop()
        postgres.stop()


async def scenario(server, users):
    baseline = server.rss_kib()
    gate = asyncio.Semaphore(256)
    started = time.monotonic()
    results = await asyncio.gather(*(open_connection(server.ws_url, token, index, gate)
                                     for index, (_, token) in enumerate(users)))
    log(f"{len(results)} connections said hello in {time.monotonic() - started:.1f} s")
    connected = server.metric("parley_realtime_connections")
    check(connected == CONNECTIONS, f"server reports {connected} realtime connections")
    rss = server.rss_kib()
    log(f"server RSS {rss} KiB ({(rss - baseline) * 1024 / CONNECTIONS:.0f} bytes per connection above the idle server)")

    await asyncio.sleep(IDLE_SECONDS)
    closed = [index for index, (ws, _) in enumerate(results) if ws.close_code is not None]
    check(not closed, f"{len(closed)} connections closed while idle (first: {closed[:5]})")
    pings = [counter.pings for _, counter in results]
    check(min(pings) >= 2, f"every connection must have been pinged at least twice; fewest pings: {min(pings)}")
    log(f"after {IDLE_SECONDS} s idle: all {CONNECTIONS} open; pings per connection min {min(pings)} max {max(pings)}")
    check(server.metric("parley_realtime_connections") == CONNECTIONS, "connections dropped on the server")

    await asyncio.gather(*(ws.close() for ws, _ in results))
    deadline = time.monotonic() + 30
    while server.metric("parley_realtime_connections") != 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    check(server.metric("parley_realtime_connections") == 0, "connections still registered after closing")
    log("10k idle connections: all checks passed")


if __name__ == "__main__":
    run(main)
