#!/usr/bin/env python3
"""Call-setup benchmark driver: starts a throwaway PostgreSQL and `parley serve` (release build,
`$PARLEY_BIN`), creates 2 × pairs users with sessions, compiles bench/calls/callbench.c and runs
it against the server, then prints its percentiles with the server's CPU time per call and the
machine's load average (the numbers only mean something on an otherwise idle machine).

Usage: run.py [--rate 1000] [--duration 10] [--warmup 2] [--pairs 400] [--threads 2]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Tests", "integration"))
from realtime_support import ParleyServer, TempPostgres, create_users, log  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=2)
    arguments = parser.parse_args()

    work = tempfile.mkdtemp(prefix="parley-bench-calls-")
    binary = os.path.join(work, "callbench")
    subprocess.run(["cc", "-O2", "-o", binary, os.path.join(HERE, "callbench.c")], check=True)
    postgres = TempPostgres()
    url = postgres.create_database("bench")
    server = ParleyServer(url, extra=["--call-max-per-user", "2"], threads=arguments.threads).start()
    try:
        users = create_users(postgres, "bench", "b", 2 * arguments.pairs)
        users_file = os.path.join(work, "users.txt")
        with open(users_file, "w") as f:
            f.write("".join(f"{user}|{token}\n" for user, token in users))
        cpu_before = cpu_seconds(server.process.pid)
        started = time.monotonic()
        result = subprocess.run([binary, "--port", str(server.port), "--users", users_file, "--rate", str(arguments.rate),
                                 "--warmup", str(arguments.warmup), "--duration", str(arguments.duration)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=arguments.duration + arguments.warmup + 120)
        elapsed = time.monotonic() - started
        cpu = cpu_seconds(server.process.pid) - cpu_before
        load = os.getloadavg()[0]
    except BaseException:
        log(server.log())
        raise
    finally:
        server.stop()
        postgres.stop()
        shutil.rmtree(work, ignore_errors=True)
    log(f"load: {arguments.rate} call setups/s for {arguments.duration:.0f} s (+{arguments.warmup:.0f} s warm-up) over "
        f"{arguments.pairs} caller/callee pairs; parley --threads {arguments.threads}; 1-minute load average {load:.1f}")
    log(result.stdout.rstrip())
    log(f"server CPU: {cpu:.2f} s over {elapsed:.1f} s (connecting, warm-up and run)")
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
