#!/usr/bin/env python3
"""`POST /parse/push` to N installations (default 100,000; issue 19): seconds from the request
until every push job is queued (the push's `_PushStatus.count` reaches N and its pages are
done), and Parley's peak RSS meanwhile. No gateway is configured, so the jobs are queued and
then marked skipped; the clock stops when queueing is complete, not when jobs are sent.

Installations are inserted with SQL (half iOS, half Android, all in channel "all").

Usage: bench/push/parse_push.py [--installations N] [--threads N]
Environment: PARLEY_BIN (default .build/release/parley).
"""
import argparse
import json
import os
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
from realtime_support import ParleyServer, TempPostgres  # noqa: E402

APP_ID, MASTER_KEY = "bench-app", "bench-master"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--installations", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    postgres = TempPostgres()
    database = "bench_parse_push"
    server = ParleyServer(postgres.create_database(database), threads=args.threads,
                          extra=["--app-id", APP_ID, "--master-key", MASTER_KEY, "--log-level", "error"]).start()
    try:
        postgres.psql(database, f"""
            INSERT INTO installations (object_id, installation_id, device_type, device_token, data)
            SELECT 'i' || lpad(n::text, 9, '0'), 'install-' || n, CASE WHEN n % 2 = 0 THEN 'ios' ELSE 'android' END,
                   'token-' || n, '{{"channels": ["all"]}}'::jsonb
              FROM generate_series(1, {args.installations}) n;
            ANALYZE installations;
        """)
        headers = {"X-Parse-Application-Id": APP_ID, "X-Parse-Master-Key": MASTER_KEY, "Content-Type": "application/json"}
        started = time.time()
        request = urllib.request.Request(server.http_url + "/parse/push", method="POST", headers=headers,
                                         data=json.dumps({"channels": ["all"], "data": {"alert": "hello", "badge": "Increment"}}).encode())
        with urllib.request.urlopen(request, timeout=60) as response:
            push_id = response.headers["X-Parse-Push-Status-Id"]
        answered = time.time() - started
        peak = 0
        while True:
            peak = max(peak, server.rss_kib())
            row = postgres.psql(database, f"SELECT num_queued, status FROM push_statuses WHERE object_id = '{push_id}'")
            queued, status = row.split("|")
            if status == "queued" and int(queued) >= args.installations:
                break
            time.sleep(0.05)
        elapsed = time.time() - started
        print(f"{args.installations} installations: answered in {answered * 1000:.0f} ms, every job queued after {elapsed:.2f} s, "
              f"peak RSS {peak / 1024:.0f} MiB")
    finally:
        server.stop()
        postgres.stop()


if __name__ == "__main__":
    main()
