#!/usr/bin/env python3
"""Realtime benchmarks (results go to docs/performance.md by hand):

  throughput  500 sender/recipient pairs over /v1/socket, each recipient online, 100-byte
              messages committed before `ok`: delivered messages/s and send→receive p50/p99
              (bench/realtime/rtbench.c, closed loop with a window of sends in flight per sender).
  reference   PostgreSQL's own rate for the same rows, with pgbench on the same cluster:
              (a) one message + its queue row per transaction (what committing each send alone
              costs), (b) 256 messages + queue rows per transaction (raw batched inserts), and
              (c) the server's own group-commit function rt_send_batch with 256 messages per call, and
              (d) that, plus the acknowledgements that follow (recipients, then senders' receipts).
              With --hook before, the same runs again with a `beforeMessage` Cloud Code hook
              registered (bench/realtime/webhook.py, a keep-alive asyncio webhook answering
              {"success":true}), so every send waits for a webhook call before its commit.
  memory      server RSS per idle authenticated connection at the given connection counts (past
              one process's fd limit, spread over several nodes on the same database).

Usage: bench/realtime/run.py [--pairs 500] [--window 8] [--rate 2000,5000] [--duration 20] [--idle 10000,19000]
                             [--hook none,before] [--only throughput|reference|memory]
Needs the release binary ($PARLEY_BIN or .build/release/parley), cc, and PostgreSQL's programs.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Tests", "integration"))
from realtime_support import ParleyServer, TempPostgres, create_users, log, pg_bin, raise_nofile  # noqa: E402

POSTGRES_SETTINGS = {
    # Durable: fsync and synchronous_commit stay on (an `ok` means the commit is on disk).
    "shared_buffers": "512MB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
    "wal_buffers": "16MB",
}


def build_client(workdir):
    binary = os.path.join(workdir, "rtbench")
    subprocess.run(["cc", "-O2", "-o", binary, os.path.join(HERE, "rtbench.c")], check=True)
    return binary


def tokens_file(workdir, users, name):
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        for user, token in users:
            f.write(f"{user} {token}\n")
    return path


MASTER_KEY = "bench-master"


def start_webhook(workdir):
    port_file = os.path.join(workdir, "webhook.port")
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "webhook.py"), port_file], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while not (os.path.exists(port_file) and open(port_file).read()):
        if time.time() > deadline or process.poll() is not None:
            raise RuntimeError("the benchmark webhook did not start")
        time.sleep(0.05)
    return process, int(open(port_file).read())


def set_hook(server, url):
    """Registers (url) or removes (None) the beforeMessage hook through the Hooks API."""
    import urllib.request
    headers = {"X-Parse-Application-Id": "parley", "X-Parse-Master-Key": MASTER_KEY, "Content-Type": "application/json"}
    if url:
        body = json.dumps({"className": "_Message", "triggerName": "beforeMessage", "url": url}).encode()
        request = urllib.request.Request(server.http_url + "/parse/hooks/triggers", data=body, method="POST", headers=headers)
    else:
        request = urllib.request.Request(server.http_url + "/parse/hooks/triggers/_Message/beforeMessage", method="DELETE", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def throughput(args, postgres, workdir, client):
    url = postgres.create_database("bench")
    if args.stats:
        postgres.psql("bench", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    server = ParleyServer(url, extra=["--realtime-send-rate", "1000000", "--realtime-send-burst", "1000000", "--app-id", "parley",
                                      "--master-key", MASTER_KEY, "--webhook-connections", "64", "--webhook-queue", "4096"]).start()
    webhook = None
    try:
        users = create_users(postgres, "bench", "b", 2 * args.pairs)
        path = tokens_file(workdir, users, "pairs.txt")
        results = []
        runs = [(hook, "--window", w) for hook in args.hook for w in args.window] + [(hook, "--rate", r) for hook in args.hook for r in args.rate]
        current = "none"
        for hook, flag, value in runs:
            if hook != current:
                if hook == "before" and webhook is None:
                    webhook, port = start_webhook(workdir)
                    args.webhook_url = f"http://127.0.0.1:{port}/beforeMessage"
                set_hook(server, args.webhook_url if hook == "before" else None)
                current = hook
                time.sleep(0.5)
            log(f"throughput: {args.pairs} pairs, hook {hook}, {flag[2:]} {value}, {args.warmup:g} s warm-up + {args.duration:g} s")
            output = subprocess.run([client, "throughput", "--port", str(server.port), "--tokens", path,
                                     "--pairs", str(args.pairs), flag, str(value), "--size", "100",
                                     "--warmup", str(args.warmup), "--duration", str(args.duration)],
                                    stdout=subprocess.PIPE, text=True, check=False)
            line = output.stdout.strip().splitlines()[-1] if output.stdout.strip() else "{}"
            result = json.loads(line)
            result["batch_size_mean"] = batch_mean(server)
            result["hook"] = hook
            log(json.dumps(result))
            results.append(result)
            if args.stats:
                log_statistics(postgres)
        return results
    finally:
        server.stop()
        if webhook:
            webhook.terminate()
            log(f"webhook answered {webhook.communicate(timeout=10)[0].strip()} calls")


def log_statistics(postgres):
    """Where PostgreSQL spent its time (--stats): per plpgsql function and per top-level statement."""
    log("functions (self ms, total ms, calls):\n" + postgres.psql("bench", """
        SELECT funcname, round(self_time), round(total_time), calls FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 12"""))
    log("statements (total ms, calls, rows, wal bytes, query):\n" + postgres.psql("bench", """
        SELECT round(total_exec_time), calls, rows, wal_bytes, left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
          FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25"""))
    log("tables (inserts, updates, hot updates, deletes, dead rows, seq scans, rows read by them, index scans):\n" + postgres.psql("bench", """
        SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup, seq_scan, seq_tup_read, idx_scan FROM pg_stat_user_tables
         WHERE n_tup_ins + n_tup_upd + n_tup_del + seq_scan > 0 ORDER BY relname"""))
    log("wal and checkpoints:\n" + postgres.psql("bench", """
        SELECT 'wal', wal_records, wal_fpi, pg_size_pretty(wal_bytes) FROM pg_stat_wal
        UNION ALL SELECT 'checkpoints', checkpoints_timed, checkpoints_req, pg_size_pretty(buffers_checkpoint * 8192::bigint)
          FROM pg_stat_bgwriter"""))


def batch_mean(server):
    total = server.metric("parley_realtime_send_batch_size_sum")
    count = server.metric("parley_realtime_send_batch_size_count")
    return round(total / count, 1) if total and count else None


def pgbench(postgres, database, script, clients, seconds, workdir, name):
    path = os.path.join(workdir, name + ".sql")
    with open(path, "w") as f:
        f.write(script)
    command = [pg_bin("pgbench"), "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres", "-n",
               "-c", str(clients), "-j", "2", "-T", str(seconds), "-f", path, database]
    output = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tps = None
    for line in output.stdout.splitlines():
        if line.startswith("tps = "):
            tps = float(line.split()[2])
    if tps is None:
        raise RuntimeError(output.stdout)
    return tps


REFERENCE_DATABASE = "reference"


def prepare_reference(postgres):
    """A fresh copy of the throughput run's starting point: migrated, 2 × 500 users, each with its
    device. Fresh, because the tables a throughput run leaves behind (and its plans) are not what
    the reference is about: (d) ran at a few messages/s on them."""
    url = postgres.create_database(REFERENCE_DATABASE)
    ParleyServer(url).start().stop()
    create_users(postgres, REFERENCE_DATABASE, "b", 1000)
    postgres.psql(REFERENCE_DATABASE, """
        SELECT count(rt_register_device(u.object_id, CASE WHEN n % 2 = 1 THEN 'bench-tx-' ELSE 'bench-rx-' END || (n - 1),
                                        NULL, NULL, 0))
          FROM (SELECT object_id, row_number() OVER (ORDER BY object_id) AS n FROM users WHERE object_id LIKE 'b%') u""")


def reference(args, postgres, workdir):
    """pgbench on the reference database (users, devices and functions already there)."""
    database = REFERENCE_DATABASE
    postgres.psql(database, "CREATE TABLE IF NOT EXISTS ref_seq_holder (id int); CREATE SEQUENCE IF NOT EXISTS ref_seq")
    single = """
\\set s random(1, 500)
BEGIN;
INSERT INTO rt_messages (id, sender, client_message_id, recipients, body, headers, sent_at)
VALUES (gen_random_uuid(), 'ref' || :s, md5(random()::text), ARRAY['r' || :s], repeat('x', 100), '{}', now());
INSERT INTO rt_queue (user_id, device_id, seq, kind, message_id)
VALUES ('r' || :s, 'ref-device', nextval('ref_seq'), 'message', gen_random_uuid());
END;
"""
    batched = """
BEGIN;
INSERT INTO rt_messages (id, sender, client_message_id, recipients, body, headers, sent_at)
SELECT gen_random_uuid(), 'ref' || (g % 500), md5(random()::text), ARRAY['r' || (g % 500)], repeat('x', 100), '{}', now()
  FROM generate_series(1, 256) g;
INSERT INTO rt_queue (user_id, device_id, seq, kind, message_id)
SELECT 'r' || (g % 500), 'ref-device', nextval('ref_seq'), 'message', gen_random_uuid() FROM generate_series(1, 256) g;
END;
"""
    # The server's own statement: pairs (2k+1 → 2k+2, 1-based user numbers) like the socket benchmark.
    function = """
\\set base random(0, 499)
SELECT count(*) FROM rt_send_batch(
    ARRAY(SELECT g FROM generate_series(1, 256) g),
    ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 256)),
    ARRAY(SELECT 'b' || lpad((2 * ((:base + g) % 500) + 1)::text, 9, '0') FROM generate_series(1, 256) g),
    ARRAY(SELECT 'bench-tx-' || (2 * ((:base + g) % 500)) FROM generate_series(1, 256) g),
    ARRAY(SELECT md5(random()::text) FROM generate_series(1, 256)),
    ARRAY(SELECT repeat('x', 100) FROM generate_series(1, 256)),
    ARRAY(SELECT '{}'::jsonb FROM generate_series(1, 256)),
    ARRAY(SELECT (extract(epoch FROM now()) * 1000)::bigint FROM generate_series(1, 256)),
    ARRAY(SELECT g FROM generate_series(1, 256) g),
    ARRAY(SELECT 'b' || lpad((2 * ((:base + g) % 500) + 2)::text, 9, '0') FROM generate_series(1, 256) g),
    'refnode');
"""
    # The server's whole database work per message: a send of 250 messages, then the recipients'
    # devices acknowledge them (queueing the senders' `delivered` receipts), then the senders'
    # devices acknowledge the receipts; one acknowledgement per device, as at the benchmark's
    # pace. Two clients, each with its own 250 pairs (the server's loops do not share devices
    # either), so they do not wait for each other's locks.
    pairs = "(250 * :client_id + g)"
    cycle = f"""
SELECT count(*) FROM rt_send_batch(
    ARRAY(SELECT g + 1 FROM generate_series(0, 249) g),
    ARRAY(SELECT gen_random_uuid() FROM generate_series(0, 249)),
    ARRAY(SELECT 'b' || lpad((2 * {pairs} + 1)::text, 9, '0') FROM generate_series(0, 249) g),
    ARRAY(SELECT 'bench-tx-' || (2 * {pairs}) FROM generate_series(0, 249) g),
    ARRAY(SELECT md5(random()::text) FROM generate_series(0, 249)),
    ARRAY(SELECT repeat('x', 100) FROM generate_series(0, 249)),
    ARRAY(SELECT '{{}}'::jsonb FROM generate_series(0, 249)),
    ARRAY(SELECT (extract(epoch FROM now()) * 1000)::bigint FROM generate_series(0, 249)),
    ARRAY(SELECT g + 1 FROM generate_series(0, 249) g),
    ARRAY(SELECT 'b' || lpad((2 * {pairs} + 2)::text, 9, '0') FROM generate_series(0, 249) g),
    'refnode');
"""
    for role, device in ((2, "rx"), (1, "tx")):
        cycle += f"""
SELECT count(*) FROM rt_ack_batch(
    ARRAY(SELECT d.user_id FROM generate_series(0, 249) g JOIN rt_devices d
            ON d.user_id = 'b' || lpad((2 * {pairs} + {role})::text, 9, '0') AND d.device_id = 'bench-{device}-' || (2 * {pairs} + {role} - 1)
           ORDER BY g),
    ARRAY(SELECT d.device_id FROM generate_series(0, 249) g JOIN rt_devices d
            ON d.user_id = 'b' || lpad((2 * {pairs} + {role})::text, 9, '0') AND d.device_id = 'bench-{device}-' || (2 * {pairs} + {role} - 1)
           ORDER BY g),
    ARRAY(SELECT d.next_seq - 1 FROM generate_series(0, 249) g JOIN rt_devices d
            ON d.user_id = 'b' || lpad((2 * {pairs} + {role})::text, 9, '0') AND d.device_id = 'bench-{device}-' || (2 * {pairs} + {role} - 1)
           ORDER BY g),
    'refnode');
"""
    results = {}
    for name, script, clients, per_tx in (("single", single, 16, 1), ("batched", batched, 4, 256), ("rt_send_batch", function, 4, 256),
                                          ("send_and_acks", cycle, 2, 250)):
        tps = pgbench(postgres, database, script, clients, args.reference_seconds, workdir, name)
        results[name] = {"clients": clients, "tps": round(tps, 1), "messages_per_s": round(tps * per_tx)}
        log(f"pgbench {name}: {clients} clients, {tps:.1f} tps = {tps * per_tx:.0f} messages/s")
    return results


def memory(args, postgres, workdir, client):
    """RSS per idle authenticated connection. One process holds at most its hard RLIMIT_NOFILE of
    sockets (20,000 in this container, not raisable without CAP_SYS_RESOURCE), so larger counts
    are spread over several `parley serve` nodes on the same database, as a deployment would run
    them, and the RSS growth of all nodes is summed."""
    counts = [int(n) for n in args.idle.split(",") if n]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per_process = max(1000, hard - 500)
    url = postgres.create_database("idle")
    nodes = max(1, -(-max(counts) // per_process))
    log(f"memory: {nodes} node(s), at most {per_process} connections per process")
    servers = [ParleyServer(url).start() for _ in range(nodes)]
    results = []
    try:
        users = create_users(postgres, "idle", "m", max(counts))
        path = tokens_file(workdir, users, "idle.txt")
        for count in counts:
            time.sleep(2)
            used = -(-count // per_process)
            baseline = [server.rss_kib() for server in servers[:used]]
            clients = []
            offset = 0
            for index, server in enumerate(servers[:used]):
                share = count // used + (1 if index < count % used else 0)
                end = offset + share
                while offset < end:
                    n = min(per_process, end - offset)
                    process = subprocess.Popen([client, "idle", "--port", str(server.port), "--tokens", path, "--count", str(n),
                                                "--offset", str(offset)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               text=True, preexec_fn=raise_nofile)
                    clients.append(process)
                    offset += n
            ready = [process.stdout.readline().strip() for process in clients]
            # Past one realtime heartbeat (10 s), which returns the heap pages the handshake burst freed.
            time.sleep(12)
            connected = sum(server.metric("parley_realtime_connections") for server in servers[:used])
            rss = [server.rss_kib() for server in servers[:used]]
            per = (sum(rss) - sum(baseline)) * 1024 / count
            log(f"memory: {count} idle connections on {used} node(s) ({ready}): servers say {connected:.0f}; "
                f"RSS {sum(baseline)} → {sum(rss)} KiB, {per:.0f} bytes per connection")
            results.append({"connections": count, "nodes": used, "registered": connected,
                            "rss_before_kib": sum(baseline), "rss_after_kib": sum(rss), "bytes_per_connection": round(per)})
            for process in clients:
                process.stdin.close()
            for process in clients:
                process.wait(timeout=60)
            deadline = time.time() + 30
            while any(server.metric("parley_realtime_connections") for server in servers) and time.time() < deadline:
                time.sleep(0.2)
        return results
    finally:
        for server in servers:
            server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--window", default="8", help="closed-loop runs: comma-separated windows (sends in flight per sender)")
    parser.add_argument("--rate", default="", help="open-loop runs: comma-separated total rates (messages/s)")
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--reference-seconds", type=int, default=15)
    parser.add_argument("--idle", default="10000,19000")
    parser.add_argument("--hook", default="none", help="throughput runs: comma-separated hook modes, none and/or before (a beforeMessage webhook)")
    parser.add_argument("--only", choices=["throughput", "reference", "memory"])
    parser.add_argument("--stats", action="store_true",
                        help="record and print PostgreSQL's time per function and statement, table writes and WAL (costs some speed)")
    args = parser.parse_args()
    args.window = [int(w) for w in args.window.split(",") if w]
    args.rate = [int(r) for r in args.rate.split(",") if r]
    args.hook = [h for h in args.hook.split(",") if h]
    if any(h not in ("none", "before") for h in args.hook):
        parser.error("--hook takes none and/or before")
    log(f"RLIMIT_NOFILE {raise_nofile()} (the hard limit bounds connections per process)")
    workdir = tempfile.mkdtemp(prefix="parley-rt-bench-")
    client = build_client(workdir)
    settings = dict(POSTGRES_SETTINGS)
    if args.stats:
        settings.update({"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
                         "track_functions": "pl", "track_wal_io_timing": "on"})
    postgres = TempPostgres(settings=settings)
    report = {"cores": os.cpu_count()}
    try:
        if args.only in (None, "throughput"):
            report["throughput"] = throughput(args, postgres, workdir, client)
        if args.only in (None, "reference"):
            prepare_reference(postgres)
            report["reference"] = reference(args, postgres, workdir)
        if args.only in (None, "memory"):
            report["memory"] = memory(args, postgres, workdir, client)
    finally:
        postgres.stop()
    results = os.path.join(HERE, "..", "results")
    os.makedirs(results, exist_ok=True)
    out = os.path.join(results, f"realtime-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    log(f"written to {out}")


if __name__ == "__main__":
    main()
