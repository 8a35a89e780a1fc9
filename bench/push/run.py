#!/usr/bin/env python3
"""Push drain benchmark: N queued push jobs (default 100,000) drained by `parley serve` to a local
gorush-compatible sink. Reports jobs/s and gateway requests/s, with CPU seconds of Parley and of
PostgreSQL.

Jobs are inserted in one transaction as the enqueue hook makes them for offline devices: message
jobs (past their collapse window, referring to a stored message and its sender, so the claim's
joins run) and call jobs, half each. The clock starts when that transaction has committed and
stops at the last job's sent_at. The sink is nginx answering every POST /api/push with gorush's
sync-mode success body (`--sink python` uses the test suite's Python sink, which parses every
notification and is itself the bottleneck). PostgreSQL runs with its defaults (fsync and
synchronous_commit on) in a temporary cluster.

Usage: bench/push/run.py [--jobs N] [--batch-size N] [--concurrency N] [--threads N] [--sink nginx|python] [--rounds N]
Environment: PARLEY_BIN (default .build/release/parley).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
from realtime_support import ParleyServer, TempPostgres, free_port, log  # noqa: E402
from push_support import GorushSink  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICKS


def postgres_pids(postgres):
    """The cluster's postmaster and its live children (backends, background processes)."""
    with open(os.path.join(postgres.data, "postmaster.pid")) as f:
        master = int(f.readline())
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(master)], stdout=subprocess.PIPE, text=True).stdout.split()
    return [master] + [int(p) for p in children]


def start_nginx(work):
    port = free_port()
    directory = os.path.join(work, "nginx")
    os.makedirs(directory, exist_ok=True)
    body = '{"success":"ok","counts":1,"logs":[]}'
    with open(os.path.join(directory, "nginx.conf"), "w") as conf:
        conf.write(f"""worker_processes 1;
daemon off;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
    client_max_body_size 16m;
    client_body_buffer_size 1m;
    client_body_temp_path {directory}/client_body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location = /api/push {{
            default_type application/json;
            return 200 '{body}';
        }}
    }}
}}
""")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    process = subprocess.Popen([nginx, "-p", directory, "-c", os.path.join(directory, "nginx.conf"), "-e", os.path.join(directory, "error.log")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/push", data=b"{}", method="POST")
            with urllib.request.urlopen(request, timeout=1) as response:
                if response.status == 200:
                    return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


def metric_sum(server, name, label=None):
    with urllib.request.urlopen(server.http_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (label is None or label in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def one_round(postgres, sink_url, args, number):
    database = f"push_bench_{number}"
    url = postgres.create_database(database)
    server = ParleyServer(url, threads=args.threads, extra=[
        "--push-gateway-url", sink_url, "--push-batch-size", str(args.batch_size), "--push-concurrency", str(args.concurrency),
        "--push-poll-interval", "100ms", "--db-pool-size", "2"]).start()
    postgres.psql(database, """
        INSERT INTO users (object_id, username, data) VALUES ('sender0001', 'sender', '{"screenName":"Sender"}');
        INSERT INTO rt_messages (id, sender, client_message_id, recipients, body, sent_at)
        VALUES ('018f0000-0000-7000-8000-000000000001', 'sender0001', 'c1', '{}', 'A message of ordinary length, about sixty characters.', now());
    """)
    before_requests = metric_sum(server, "parley_push_gateway_requests_total", 'result="ok"')
    parley_cpu = cpu_seconds([server.process.pid])
    pg_cpu = cpu_seconds(postgres_pids(postgres))
    half = args.jobs // 2
    started = time.time()
    postgres.psql(database, f"""
        INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, message_id, sender, created_at)
        SELECT 'message', 'u' || i, 'd' || i, 1 + i % 2, 'token-' || i, md5(i::text), '018f0000-0000-7000-8000-000000000001',
               'sender0001', now() - interval '1 minute'
          FROM generate_series(1, {half}) i;
        INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, call_id, sender, payload, expires_at)
        SELECT 'call', 'v' || i, 'e' || i, 1 + i % 2, 'voip-' || i, 'call:' || i, 'call-' || i, 'sender0001',
               jsonb_build_object('callId', 'call-' || i, 'from', 'sender0001', 'video', false, 'headers', '{{"k":"v"}}'::jsonb),
               now() + interval '1 hour'
          FROM generate_series(1, {args.jobs - half}) i;
    """)
    committed = time.time()
    while True:
        if postgres.psql(database, "SELECT EXISTS (SELECT 1 FROM push_jobs WHERE state IN ('pending', 'sending'))") == "f":
            break
        if time.time() - committed > 600:
            raise RuntimeError(f"jobs not sent after 10 minutes:\n{server.log()}")
        time.sleep(0.25)
    span = float(postgres.psql(database, f"SELECT extract(epoch FROM max(sent_at)) - {committed} FROM push_jobs"))
    requests = metric_sum(server, "parley_push_gateway_requests_total", 'result="ok"') - before_requests
    parley_cpu = cpu_seconds([server.process.pid]) - parley_cpu
    pg_cpu = cpu_seconds(postgres_pids(postgres)) - pg_cpu
    server.stop()
    return {"seconds": span, "jobs_per_s": args.jobs / span, "requests_per_s": requests / span, "requests": requests,
            "insert_s": committed - started, "parley_cpu": parley_cpu, "postgres_cpu": pg_cpu}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sink", choices=["nginx", "python"], default="nginx")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres-setting", action="append", default=[], metavar="KEY=VALUE",
                        help="extra postgresql.conf setting for the temporary cluster (repeatable)")
    args = parser.parse_args()
    if not os.environ.get("PARLEY_BIN"):
        os.environ["PARLEY_BIN"] = os.path.join(REPO, ".build", "release", "parley")
    work = tempfile.mkdtemp(prefix="parley-bench-push-")
    postgres = TempPostgres(settings=dict(item.split("=", 1) for item in args.postgres_setting))
    sink_process = None
    sink = None
    try:
        if args.sink == "nginx":
            sink_process, sink_url = start_nginx(work)
        else:
            sink = GorushSink()
            sink_url = sink.url
        results = []
        for number in range(1, args.rounds + 1):
            result = one_round(postgres, sink_url, args, number)
            results.append(result)
            log(f"round {number}: {args.jobs} jobs in {result['seconds']:.2f} s = {result['jobs_per_s']:,.0f} jobs/s, "
                f"{result['requests_per_s']:,.0f} gateway requests/s ({result['requests']:.0f} requests); "
                f"CPU s: parley {result['parley_cpu']:.2f}, postgres {result['postgres_cpu']:.2f}")
        median = {key: statistics.median(r[key] for r in results) for key in results[0]}
        cpu = os.cpu_count()
        log(f"median of {args.rounds}: {median['jobs_per_s']:,.0f} jobs/s, {median['requests_per_s']:,.0f} gateway requests/s "
            f"(batch {args.batch_size}, concurrency {args.concurrency}, {args.threads} loops, {cpu} cores, sink {args.sink}); "
            f"CPU s per 100k jobs: parley {median['parley_cpu'] * 100_000 / args.jobs:.2f}, "
            f"postgres {median['postgres_cpu'] * 100_000 / args.jobs:.2f}")
    finally:
        if sink_process:
            sink_process.terminate()
            sink_process.wait()
        if sink:
            sink.close()
        postgres.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
