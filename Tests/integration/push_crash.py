#!/usr/bin/env python3
"""Crash safety of push delivery: 2,000 jobs are being sent through a slow gorush-compatible sink
(8 batches of 25 in flight) when `parley serve` is killed with SIGKILL; after a restart every job
is sent. Each job reaches the gateway once, or twice when the kill came between the gateway's
answer and the commit of "sent" (such a job's lease expires and it is sent again) — never zero
times, never three. Every twice-sent job had reached the gateway before the kill."""
import collections
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calls_support import ParleyServer, TempPostgres, check, log, run  # noqa: E402
from push_support import GorushSink, wait_for  # noqa: E402

TOTAL = 2000
BATCH = 25
LANES = 8
KILL_AFTER = 700


async def main():
    postgres = TempPostgres()
    database = "push_crash"
    url = postgres.create_database(database)
    first_sink, second_sink = GorushSink(), GorushSink()
    first_sink.configure(delay=0.15)
    second_sink.configure(delay=0.02)

    def options(sink):
        return ["--push-gateway-url", sink.url, "--push-batch-size", str(BATCH), "--push-concurrency", str(LANES),
                "--push-request-timeout", "1s", "--push-poll-interval", "200ms"]
    server = ParleyServer(url, extra=options(first_sink)).start()
    # Jobs as the enqueue hook makes them for offline devices (calls: no collapse window).
    postgres.psql(database, f"""
        INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, call_id, payload)
        SELECT 'call', 'user' || i, 'device' || i, 1, 'token-' || i, 'call:' || i, 'call-' || i,
               jsonb_build_object('callId', 'call-' || i, 'from', 'caller', 'video', false, 'headers', '{{}}'::jsonb)
          FROM generate_series(1, {TOTAL}) i
    """)
    wait_for(f"{KILL_AFTER} pushes reached the gateway", lambda: len(first_sink.all()) >= KILL_AFTER, timeout=60, interval=0.01)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=30)
    states = postgres.psql(database, "SELECT state || '=' || count(*) FROM push_jobs GROUP BY state ORDER BY state").split()
    log(f"killed after {len(first_sink.all())} pushes reached the gateway; job states: {states}")
    check(any(s.startswith("sending=") for s in states), "some jobs were in flight at the kill")

    server = ParleyServer(url, extra=options(second_sink)).start()
    wait_for("every job is sent", lambda: postgres.psql(database, "SELECT count(*) FROM push_jobs WHERE state = 'sent'") == str(TOTAL),
             timeout=120, interval=0.2)
    server.stop()

    # A request the killed server wrote just before dying may still be read by its sink's thread.
    time.sleep(0.5)
    deliveries = collections.defaultdict(list)  # job id -> which server sent it, once per send
    for generation, sink in (("first", first_sink), ("second", second_sink)):
        for record in sink.all():
            check(record["accepted"], "the sink accepted everything")
            deliveries[record["notification"]["notif_id"]].append(generation)
    ids = postgres.psql(database, "SELECT string_agg(id::text, ' ') FROM push_jobs").split()
    check(len(ids) == TOTAL, f"{len(ids)} jobs")
    counts = collections.Counter(len(deliveries.get(job, [])) for job in ids)
    log(f"deliveries per job: {dict(sorted(counts.items()))}")
    check(counts.get(0, 0) == 0, "no job was lost")
    check(max(counts) <= 2, "no job was sent three times")
    twice = [job for job in ids if len(deliveries[job]) == 2]
    check(len(twice) <= BATCH * LANES, f"{len(twice)} sent twice, at most the {BATCH * LANES} in flight at the kill")
    for job in twice:
        check(sorted(deliveries[job]) == ["first", "second"], f"job {job} was sent twice by one server: {deliveries[job]}")
    attempts = postgres.psql(database, "SELECT max(attempts) FROM push_jobs")
    check(int(attempts) <= 2, f"at most two attempts per job, got {attempts}")
    log(f"SIGKILL mid-send: all {TOTAL} jobs sent; {len(twice)} twice (sent by the killed server, commit lost): ok")
    first_sink.close()
    second_sink.close()


if __name__ == "__main__":
    run(main)
