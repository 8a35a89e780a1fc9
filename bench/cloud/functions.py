#!/usr/bin/env python3
"""Cloud function benchmark (issue 19): `POST /parse/functions/echo` through Parley to a local
webhook vs `POST` to that webhook directly, with `wrk`, in the same run. Target: Parley ≥ 0.7× the
webhook's own requests/s.

The webhook is nginx answering every POST with {"success":{"ok":true}} (a Python webhook would
be the bottleneck). Parley runs against a temporary PostgreSQL; the function hook is registered
with the master key. Each side gets `--rounds` wrk runs of `--duration` seconds; the medians and
their ratio are printed.

Usage: bench/cloud/functions.py [--threads N] [--connections N] [--duration S] [--rounds N]
Environment: PARLEY_BIN (default .build/release/parley). Needs wrk and nginx on PATH.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
from realtime_support import ParleyServer, TempPostgres, free_port  # noqa: E402

APP_ID, MASTER_KEY = "bench-app", "bench-master"


def start_nginx(port, directory):
    conf = os.path.join(directory, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1; daemon off; pid {directory}/nginx.pid; error_log {directory}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off; keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port};
    location / {{ default_type application/json; return 200 '{{"success":{{"ok":true}}}}'; }} }}
}}""")
    return subprocess.Popen(["nginx", "-c", conf, "-p", directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wrk(url, threads, connections, duration, headers, body):
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write('wrk.method = "POST"\nwrk.body = ' + json.dumps(body) + "\n")
    for name, value in headers.items():
        script.write(f'wrk.headers["{name}"] = "{value}"\n')
    script.close()
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{duration}s", "-s", script.name, url],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    os.unlink(script.name)
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if "Non-2xx" in out:
        raise SystemExit(f"wrk saw errors against {url}:\n{out}")
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is required")
    directory = tempfile.mkdtemp(prefix="parley-bench-cloud-")
    port = free_port()
    nginx = start_nginx(port, directory)
    postgres = TempPostgres()
    server = ParleyServer(postgres.create_database("bench_cloud"), extra=[
        "--app-id", APP_ID, "--master-key", MASTER_KEY, "--webhook-connections", "64", "--webhook-queue", "4096", "--log-level", "error"]).start()
    try:
        request = urllib.request.Request(server.http_url + "/parse/hooks/functions", method="POST",
                                         data=json.dumps({"functionName": "echo", "url": f"http://127.0.0.1:{port}/echo"}).encode(),
                                         headers={"X-Parse-Application-Id": APP_ID, "X-Parse-Master-Key": MASTER_KEY,
                                                  "Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
        body = {"params": {"n": 1}}
        direct, through = [], []
        for _ in range(args.rounds):
            direct.append(wrk(f"http://127.0.0.1:{port}/echo", args.threads, args.connections, args.duration,
                              {"Content-Type": "application/json"}, json.dumps(body)))
            through.append(wrk(server.http_url + "/parse/functions/echo", args.threads, args.connections, args.duration,
                               {"Content-Type": "application/json", "X-Parse-Application-Id": APP_ID}, json.dumps({"n": 1})))
        d, t = statistics.median(direct), statistics.median(through)
        print(f"webhook direct: {d:.0f} req/s   through Parley: {t:.0f} req/s   ratio {t / d:.2f} (target >= 0.70)")
    finally:
        server.stop()
        postgres.stop()
        nginx.terminate()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
