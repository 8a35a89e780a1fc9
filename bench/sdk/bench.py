#!/usr/bin/env python3
"""ParleyKit throughput and CPU per message against a local `parley serve` (release builds).

Starts a throwaway PostgreSQL and server (send rate limit raised), signs two users up through
the Parse REST API and runs parley-sdk-bench with file and in-memory storage.

Usage: swift build -c release --product parley && swift build -c release --product parley-sdk-bench
       .venv/bin/python bench/sdk/bench.py [count]
Environment: PARLEY_SDK_BENCH_STORAGE ("file memory"), PARLEY_SDK_BENCH_PREFIX (a profiler
command to run the client under, e.g. "perf record -e cpu-clock -g -o /tmp/sdk.perf").
"""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "integration"))
from realtime_support import REPO, ParleyServer, TempPostgres  # noqa: E402


def signup(server, name):
    request = urllib.request.Request(server.http_url + "/parse/users", method="POST",
                                     data=json.dumps({"username": name, "password": "pw-" + name}).encode(),
                                     headers={"X-Parse-Application-Id": "parley", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    return body["objectId"], body["sessionToken"]


def main():
    count = sys.argv[1] if len(sys.argv) > 1 else "20000"
    binary = os.environ.get("PARLEY_SDK_BENCH_BIN", os.path.join(REPO, ".build", "release", "parley-sdk-bench"))
    postgres = TempPostgres()
    prefix = os.environ.get("PARLEY_SDK_BENCH_PREFIX", "").split()
    for storage in os.environ.get("PARLEY_SDK_BENCH_STORAGE", "file memory").split():
        server = ParleyServer(postgres.create_database(f"sdk_bench_{storage}"),
                              extra=["--realtime-send-rate", "1000000", "--realtime-send-burst", "1000000"]).start()
        _, sender_token = signup(server, "sender")
        receiver_id, receiver_token = signup(server, "receiver")
        subprocess.run(prefix + [binary, "--server", server.http_url, "--sender-token", sender_token, "--receiver-id", receiver_id,
                        "--receiver-token", receiver_token, "--count", count, "--storage", storage,
                        "--dir", f"/tmp/parley-sdk-bench-{os.getpid()}-{storage}"], check=True, timeout=600)
        server.stop()
    postgres.stop()


if __name__ == "__main__":
    main()
