"""Helpers for the call integration tests and bench/calls (imported, not run as a suite).

The PostgreSQL cluster, the server process and the users come from realtime_support (the
realtime tests' helpers). CallClient is one device on /v1/socket (the `websockets` library from
PyPI): requests with ids, every other frame in an event queue, and helpers for call.* frames.
"""
import asyncio
import hashlib
import hmac
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realtime_support import ParleyServer, TempPostgres, check, create_users, free_port, log  # noqa: E402,F401


class DeviceLabels:
    """The opaque labels the server shows for devices in call.answered and call history:
    HMAC-SHA256 under the database's key (rt_settings) of "<user>\\0<device>", 24 hex digits."""

    def __init__(self, postgres, database):
        self.key = postgres.psql(database, "SELECT device_label_key FROM rt_settings").encode()

    def __call__(self, user, device):
        return hmac.new(self.key, f"{user}\0{device}".encode(), hashlib.sha256).hexdigest()[:24]


def new_call_id():
    return str(uuid.uuid4())


class CallClient:
    """One device on /v1/socket: replies matched by request id, every other frame queued."""

    def __init__(self, ws, welcome, name):
        self.ws = ws
        self.welcome = welcome
        self.name = name
        self.next_id = 0
        self.replies = {}
        self.events = asyncio.Queue()
        self.seen = []
        self.last_seq = 0
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url, token, device, resume_after=0):
        import websockets
        ws = await websockets.connect(url, ping_interval=None, max_size=2 ** 20)
        await ws.send(json.dumps({"type": "hello", "sessionToken": token, "deviceId": device, "resumeAfter": resume_after}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if reply.get("type") != "welcome":
            await ws.close()
            raise RuntimeError(f"hello refused: {reply}")
        return cls(ws, reply, device)

    @property
    def user_id(self):
        return self.welcome["userId"]

    async def _read(self):
        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame.get("type") in ("ok", "error") and frame.get("re") in self.replies:
                    self.replies.pop(frame["re"]).set_result(frame)
                    continue
                if "seq" in frame:
                    self.last_seq = max(self.last_seq, frame["seq"])
                self.seen.append(frame)
                await self.events.put(frame)
        except Exception:  # noqa: BLE001 - a closed socket ends the reader
            return

    async def request(self, frame, timeout=30):
        self.next_id += 1
        frame = dict(frame, id=self.next_id)
        future = asyncio.get_running_loop().create_future()
        self.replies[self.next_id] = future
        await self.ws.send(json.dumps(frame))
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"no reply to {frame['type']} within {timeout} s: {str(frame)[:200]}") from None

    async def call(self, frame_type, call_id, **fields):
        """Sends `call.<frame_type>` for `call_id`; returns the reply (`ok` or `error`)."""
        return await self.request(dict({"type": "call." + frame_type, "callId": call_id}, **fields))

    async def next_event(self, kind=None, call_id=None, timeout=10):
        """The next queued frame of type `kind` (and call), skipping others."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{self.name}: no {kind} for {call_id} within {timeout} s; seen {self.seen[-6:]}")
            try:
                event = await asyncio.wait_for(self.events.get(), remaining)
            except asyncio.TimeoutError:
                raise AssertionError(f"{self.name}: no {kind} for {call_id} within {timeout} s; seen {self.seen[-6:]}") from None
            if (kind is None or event.get("type") == kind) and (call_id is None or event.get("callId") == call_id):
                return event

    async def expect_no_event(self, kind=None, seconds=0.5, call_id=None):
        """Fails if a frame (of type `kind`, for `call_id`) arrives within `seconds`; others are dropped."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                event = await asyncio.wait_for(self.events.get(), remaining)
            except asyncio.TimeoutError:
                return
            if (kind is None or event.get("type") == kind) and (call_id is None or event.get("callId") == call_id):
                raise AssertionError(f"{self.name}: unexpected {event}")

    async def ack(self):
        if self.last_seq:
            await self.ws.send(json.dumps({"type": "ack", "upTo": self.last_seq}))

    async def close(self):
        await self.ws.close()
        self.reader.cancel()

    def drop(self):
        """Cuts the TCP connection without a close handshake (a lost network)."""
        self.ws.transport.abort()
        self.reader.cancel()


def run(main):
    try:
        asyncio.run(main())
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.exit(1)
