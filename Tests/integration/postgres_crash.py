#!/usr/bin/env python3
"""Durability when PostgreSQL itself crashes: on a cluster with production settings (fsync,
synchronous_commit, full_page_writes on) a client sends 600 messages while 1,000 push jobs go
through a gorush-compatible sink; PostgreSQL is stopped with `pg_ctl stop -m immediate` in the
middle, then restarted. Every message acknowledged before the crash is still there and is
delivered, none twice after dedupe by messageId; every push job is there and reaches the gateway
(once after dedupe by its id). The message transactions run with synchronous_commit on, read from
the server's own session by a trigger this test installs on rt_messages."""
import asyncio
import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from push_support import GorushSink, wait_for  # noqa: E402
from realtime_crash import Receiver, hello  # noqa: E402
from realtime_support import ParleyServer, TempPostgres, check, create_users, log, pg_bin, run  # noqa: E402

import websockets  # noqa: E402

TOTAL = 600
CRASH_AFTER = 200
JOBS = 1000
WINDOW = 32
DATABASE = "pg_crash"


def pg_ctl(postgres, *arguments):
    postgres._run([pg_bin("pg_ctl"), "-D", postgres.data, "-l", os.path.join(postgres.directory, "postgres.log"), "-w", "-t", "60"]
                  + list(arguments))


async def send_all(url, token, receiver, client_ids, acknowledged, on_progress):
    """Sends every id (WINDOW in flight), re-sending after an error or a dropped connection
    with the same clientMessageId, until each has an `ok`."""
    queue = list(client_ids)
    while queue:
        ws, _ = await hello(url, token, "sender-phone")
        outstanding, next_request = {}, 0
        try:
            while queue or outstanding:
                while queue and len(outstanding) < WINDOW:
                    client_id = queue.pop(0)
                    next_request += 1
                    outstanding[next_request] = client_id
                    await ws.send(json.dumps({"type": "message.send", "id": next_request, "clientMessageId": client_id,
                                              "to": [receiver], "text": client_id}))
                reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if reply.get("re") not in outstanding:
                    continue
                client_id = outstanding.pop(reply["re"])
                if reply["type"] == "ok":
                    previous = acknowledged.setdefault(client_id, reply["messageId"])
                    check(previous == reply["messageId"], f"{client_id} acknowledged as {previous} and {reply['messageId']}")
                    on_progress(len(acknowledged))
                else:
                    queue.append(client_id)
                    await asyncio.sleep(0.05)
        except (websockets.ConnectionClosed, OSError, asyncio.TimeoutError):
            queue.extend(outstanding.values())
        finally:
            await ws.close()


async def main():
    postgres = TempPostgres(settings={"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"})
    sink = GorushSink()
    sink.configure(delay=0.2)
    server = None
    try:
        url = postgres.create_database(DATABASE)
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            check(postgres.psql(DATABASE, f"SHOW {name}") == "on", f"{name} is on")
        server = ParleyServer(url, extra=["--realtime-send-rate", "100000", "--realtime-send-burst", "100000",
                                          "--push-gateway-url", sink.url, "--push-batch-size", "25", "--push-concurrency", "4",
                                          "--push-request-timeout", "1s", "--push-poll-interval", "200ms"]).start()
        postgres.psql(DATABASE, """
            CREATE TABLE test_commit_modes (setting text NOT NULL);
            CREATE FUNCTION test_record_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO test_commit_modes VALUES (current_setting('synchronous_commit')); RETURN NULL; END $$;
            CREATE TRIGGER test_record_commit_mode AFTER INSERT ON rt_messages
                FOR EACH ROW EXECUTE FUNCTION test_record_commit_mode();
        """)
        (sender, sender_token), (receiver, receiver_token) = create_users(postgres, DATABASE, "pc", 2)
        rx = Receiver(server.ws_url, receiver_token, receiver)
        done = asyncio.Event()
        receiver_task = asyncio.create_task(rx.run(done))

        postgres.psql(DATABASE, f"""
            INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, call_id, payload)
            SELECT 'call', 'user' || i, 'device' || i, 1, 'token-' || i, 'call:' || i, 'call-' || i,
                   jsonb_build_object('callId', 'call-' || i, 'from', 'caller', 'video', false, 'headers', '{{}}'::jsonb)
              FROM generate_series(1, {JOBS}) i
        """)
        wait_for("the first pushes reach the gateway", lambda: len(sink.all()) >= 100, timeout=30, interval=0.01)
        acknowledged, before_crash, crashed = {}, {}, asyncio.Event()

        def on_progress(count):
            if count >= CRASH_AFTER and not crashed.is_set():
                crashed.set()
                before_crash.update(acknowledged)
                pushed = len(sink.all())
                pg_ctl(postgres, "-m", "immediate", "stop")
                log(f"PostgreSQL stopped (-m immediate) with {len(before_crash)} messages acknowledged, {pushed} pushes sent")
                check(0 < pushed < JOBS, f"the crash came in the middle of the push deliveries ({pushed} sent)")
                asyncio.get_running_loop().call_later(1.0, lambda: pg_ctl(postgres, "start"))

        started = time.time()
        await asyncio.wait_for(send_all(server.ws_url, sender_token, receiver, [f"m-{n:04d}" for n in range(TOTAL)],
                                        acknowledged, on_progress), 120)
        check(crashed.is_set(), "PostgreSQL was stopped")
        log(f"all {TOTAL} acknowledged in {time.time() - started:.1f} s")

        stored = set(postgres.psql(DATABASE, "SELECT string_agg(id::text, ' ') FROM rt_messages").split())
        lost = [c for c, m in before_crash.items() if m not in stored]
        check(not lost, f"{len(lost)} messages acknowledged before the crash are not in rt_messages: {lost[:5]}")
        wanted = set(acknowledged.values())
        deadline = time.time() + 60
        while not wanted.issubset(rx.by_message) and time.time() < deadline:
            await asyncio.sleep(0.1)
        done.set()
        receiver_task.cancel()
        check(wanted.issubset(rx.by_message), f"{len(wanted - set(rx.by_message))} acknowledged messages not delivered")
        check(not rx.order_errors, f"seq went backwards: {rx.order_errors[:5]}")
        log(f"messages: every acknowledged one stored and delivered ({rx.duplicates} re-deliveries deduped by messageId): ok")

        modes = postgres.psql(DATABASE, "SELECT string_agg(DISTINCT setting, ',') FROM test_commit_modes")
        check(modes == "on", f"message transactions ran with synchronous_commit {modes!r}, not on")
        log("message transactions commit with synchronous_commit on (read in the server's session): ok")

        wait_for("every push job is sent", lambda: postgres.psql(DATABASE, "SELECT count(*) FROM push_jobs WHERE state = 'sent'")
                 == str(JOBS), timeout=60, interval=0.1)
        ids = set(postgres.psql(DATABASE, "SELECT string_agg(id::text, ' ') FROM push_jobs").split())
        delivered = [record["notification"]["notif_id"] for record in sink.all() if record["accepted"]]
        check(len(ids) == JOBS, f"{len(ids)} push jobs after the crash, {JOBS} inserted")
        check(set(delivered) == ids, f"{len(ids - set(delivered))} jobs never reached the gateway")
        log(f"push: all {JOBS} jobs there and delivered ({len(delivered) - len(ids)} re-sent, deduped by id): ok")
        log("postgres crash: all checks passed")
    except BaseException:
        if server:
            log("--- parley log\n" + server.log())
        raise
    finally:
        if server:
            server.stop()
        sink.close()
        postgres.stop()


if __name__ == "__main__":
    run(main)
