#!/usr/bin/env python3
"""Call-setup benchmark: N call setups per second between online users over /v1/socket.

Each call: caller sends call.invite → callee device gets call.incoming, acks it, sends
call.ringing and call.answer → caller gets call.answered and sends call.hangup → both get
call.ended. Measured on the client's monotonic clock: invite sent → incoming received, and
answer sent → answered received. Calls are started open-loop at a fixed rate over `--pairs`
caller/callee pairs (one device each); a pair still busy with its previous call skips a slot
(counted). The load is split over `--clients` processes (each drives its share of the pairs
and of the rate), so the Python client is not the bottleneck. Starts its own PostgreSQL and
`parley serve`; prints the percentiles, the achieved rate and the server's CPU time.

Usage: call_setup.py [--rate 1000] [--duration 10] [--warmup 2] [--pairs 400] [--clients 2] [--threads 2]
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "integration"))
from calls_support import ParleyServer, TempPostgres, create_users, log  # noqa: E402

import websockets  # noqa: E402


class Device:
    """One connection; frames dispatched to the bench by type, no per-frame queues."""

    def __init__(self, bench, ws, user_id):
        self.bench = bench
        self.ws = ws
        self.user_id = user_id
        self.next_id = 0

    @classmethod
    async def connect(cls, bench, url, token, device_id):
        ws = await websockets.connect(url, ping_interval=None, max_size=2 ** 20, compression=None)
        await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device_id, "resumeAfter": 0}))
        welcome = json.loads(await ws.recv())
        assert welcome["type"] == "welcome", welcome
        device = cls(bench, ws, welcome["userId"])
        device.reader = asyncio.create_task(device.read())
        return device

    async def send(self, frame):
        self.next_id += 1
        frame["id"] = self.next_id
        await self.ws.send(json.dumps(frame))

    async def read(self):
        try:
            async for raw in self.ws:
                await self.bench.received(self, json.loads(raw))
        except websockets.ConnectionClosed:
            pass


class Call:
    __slots__ = ("pair", "measured", "invited", "incoming", "answer_sent", "answered", "ended_caller", "ended_callee")

    def __init__(self, pair, measured):
        self.pair = pair
        self.measured = measured
        self.invited = self.incoming = self.answer_sent = self.answered = None
        self.ended_caller = self.ended_callee = False


class Bench:
    def __init__(self):
        self.calls = {}
        self.busy = set()
        self.errors = []
        self.invite_to_incoming = []
        self.answer_to_answered = []
        self.completed = 0
        self.skipped = 0

    async def received(self, device, frame):
        kind = frame.get("type")
        if kind == "error":
            self.errors.append(frame)
            return
        if kind == "ok":
            return
        call = self.calls.get(frame.get("callId"))
        if call is None:
            return
        now = time.perf_counter()
        if kind == "call.incoming":
            call.incoming = now
            await device.ws.send(json.dumps({"type": "ack", "upTo": frame["seq"]}))
            await device.send({"type": "call.ringing", "callId": frame["callId"]})
            call.answer_sent = time.perf_counter()
            await device.send({"type": "call.answer", "callId": frame["callId"], "sdp": "v=0 answer"})
        elif kind == "call.answered":
            call.answered = now
            await device.send({"type": "call.hangup", "callId": frame["callId"]})
        elif kind == "call.ended":
            if device.user_id == call.pair[0].user_id:
                call.ended_caller = True
            else:
                call.ended_callee = True
            if call.ended_caller and call.ended_callee:
                self.finish(frame["callId"], call)

    def finish(self, call_id, call):
        del self.calls[call_id]
        self.busy.discard(id(call.pair))
        if call.measured and call.incoming and call.answered:
            self.invite_to_incoming.append(call.incoming - call.invited)
            self.answer_to_answered.append(call.answered - call.answer_sent)
            self.completed += 1

    async def start_call(self, pair, measured):
        if id(pair) in self.busy:
            self.skipped += measured
            return
        self.busy.add(id(pair))
        call_id = str(uuid.uuid4())
        call = Call(pair, measured)
        self.calls[call_id] = call
        call.invited = time.perf_counter()
        await pair[0].send({"type": "call.invite", "callId": call_id, "to": pair[1].user_id, "sdp": "v=0 offer", "video": False})


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_load(ws_url, users, rate, duration, warmup_seconds, start_at):
    """One client process: its pairs, its share of the rate; returns its measurements."""
    bench = Bench()
    pairs = []
    for index in range(len(users) // 2):
        (_, caller_token), (_, callee_token) = users[2 * index], users[2 * index + 1]
        caller = await Device.connect(bench, ws_url, caller_token, "caller")
        callee = await Device.connect(bench, ws_url, callee_token, "callee")
        pairs.append((caller, callee))
    total = int((warmup_seconds + duration) * rate)
    warmup = int(warmup_seconds * rate)
    # All clients start together, after every client has connected.
    await asyncio.sleep(max(0, start_at - time.time()))
    start = time.perf_counter()
    for index in range(total):
        target = start + index / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await bench.start_call(pairs[index % len(pairs)], index >= warmup)
    deadline = time.perf_counter() + 10
    while bench.calls and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    for caller, callee in pairs:
        await caller.ws.close()
        await callee.ws.close()
    return {"incoming": bench.invite_to_incoming, "answered": bench.answer_to_answered, "completed": bench.completed,
            "skipped": bench.skipped, "errors": bench.errors[:3], "error_count": len(bench.errors)}


def client_process(ws_url, users, rate, duration, warmup, start_at, results):
    results.put(asyncio.run(run_load(ws_url, users, rate, duration, warmup, start_at)))


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clients", type=int, default=2)
    arguments = parser.parse_args()

    postgres = TempPostgres()
    url = postgres.create_database("bench")
    server = ParleyServer(url, extra=["--call-max-per-user", "2", "--db-pool-size", "4"], threads=arguments.threads).start()
    try:
        users = create_users(postgres, "bench", "b", 2 * arguments.pairs)
        share = arguments.pairs // arguments.clients
        results = multiprocessing.Queue()
        connect_time = 2 + arguments.pairs * 0.004
        start_at = time.time() + connect_time
        processes = [multiprocessing.Process(target=client_process, args=(
            server.ws_url, users[2 * share * index:2 * share * (index + 1)], arguments.rate / arguments.clients,
            arguments.duration, arguments.warmup, start_at, results)) for index in range(arguments.clients)]
        for process in processes:
            process.start()
        await asyncio.sleep(max(0, start_at - time.time()) + arguments.warmup)
        cpu_start = cpu_seconds(server.process.pid)
        measured_start = time.perf_counter()
        await asyncio.sleep(arguments.duration)
        cpu = cpu_seconds(server.process.pid) - cpu_start
        elapsed = time.perf_counter() - measured_start
        collected = [results.get(timeout=120) for _ in processes]
        for process in processes:
            process.join()
    finally:
        server.stop()
        postgres.stop()
    incoming = [value for result in collected for value in result["incoming"]]
    answered = [value for result in collected for value in result["answered"]]
    completed = sum(result["completed"] for result in collected)
    skipped = sum(result["skipped"] for result in collected)
    errors = sum(result["error_count"] for result in collected)
    samples = [error for result in collected for error in result["errors"]]
    log(f"load: {arguments.rate} setups/s for {arguments.duration:.0f} s over {arguments.pairs} pairs, "
        f"{arguments.clients} client processes, server --threads {arguments.threads}; load average {os.getloadavg()[0]:.1f}")
    log(f"completed {completed} calls ({completed / elapsed:.0f}/s); skipped (pair busy) {skipped}; errors {errors}"
        + (f" e.g. {samples[0]}" if samples else ""))
    if completed:
        for name, values in (("invite→incoming", incoming), ("answer→answered", answered)):
            log(f"{name:16} p50 {percentile(values, 0.50):6.2f} ms   p90 {percentile(values, 0.90):6.2f} ms   "
                f"p99 {percentile(values, 0.99):6.2f} ms   max {max(values) * 1000:7.2f} ms")
        log(f"server CPU: {cpu:.2f} s in {elapsed:.1f} s ({cpu / completed * 1e6:.0f} µs per call setup)")
        p99 = max(percentile(incoming, 0.99), percentile(answered, 0.99))
        log(f"target p99 < 5 ms: {'met' if p99 < 5 else 'NOT met'} (worst p99 {p99:.2f} ms)")


if __name__ == "__main__":
    asyncio.run(main())
