#!/usr/bin/env bash
# Instructions per request of the guarded Parse paths, counted by valgrind's callgrind on the
# server process (one event loop, one blocking thread) while one keep-alive client sends
# REQUESTS identical requests one after another: `GET /parse/users/me` (cached session, inline),
# the inline find `GET /parse/classes/_User?where={"username":…}`, and `POST /parse/login`
# (with `--password-ops-limit 1 --password-mem-limit 8192`, so the count is the server's own
# work around one minimal argon2id verification, not the hash). Counting is on only while
# the client runs; the embedded PostgreSQL is a child process valgrind does not follow.
# Deterministic where wall-clock rates are not: compare builds with it (docs/performance.md).
#
# Usage: bench/accounts/instructions.sh [--no-build]
# Environment: PARLEY_BIN (the binary to measure; implies --no-build), REQUESTS (100-100000,
#   default 2000), BENCH_PROFILE_DIR (keep the callgrind dumps there, for callgrind_annotate).
#   The work directory, the start and the stop are bench/accounts/common.sh's.
set -euo pipefail
PARLEY_SCRIPT=bench-accounts-instructions
# shellcheck source=bench/accounts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

requests=$(parley_int_setting REQUESTS 2000 100 100000)
command -v callgrind_control >/dev/null 2>&1 || die "valgrind not found (apt-get install valgrind)"
parley_launcher=(valgrind --tool=callgrind --instr-atstart=no "--callgrind-out-file=$work/cg.%p")
parley_ready_seconds=300
start_parley --threads 1 --blocking-threads 1 --password-ops-limit 1 --password-mem-limit 8192

# drive NAME METHOD TARGET [BODY]: REQUESTS keep-alive requests, one at a time; fails on a non-200.
cat >"$work/drive.py" <<'PY'
import socket, sys
port, count, method, target, token, body = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Parse-Application-Id: bench-app\r\n"
if token:
    head += f"X-Parse-Session-Token: {token}\r\n"
if body:
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
request = (head + "\r\n" + body).encode()
connection = socket.create_connection(("127.0.0.1", port))
buffer = b""
for _ in range(count):
    connection.sendall(request)
    while b"\r\n\r\n" not in buffer:
        buffer += connection.recv(65536)
    end = buffer.index(b"\r\n\r\n") + 4
    lines = buffer[:end].decode().split("\r\n")
    if " 200 " not in lines[0]:
        sys.exit(f"{method} {target}: {lines[0]} {buffer[end:end + 300]!r}")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    while len(buffer) < end + length:
        buffer += connection.recv(65536)
    buffer = buffer[end + length:]
PY

token="$(signup bench-user secret-password)"
find_target="/parse/classes/_User?where=%7B%22username%22%3A%22bench-user%22%7D"
login_body='{"username":"bench-user","password":"secret-password"}'

measure() {
    local name="$1" method="$2" target="$3" session="$4" body="$5" dump count
    # Warm up (caches, prepared statements, the accounts LISTEN connection) outside the count.
    python3 "$work/drive.py" "$port" 200 "$method" "$target" "$session" "$body"
    callgrind_control -z "$parley_pid" >/dev/null
    callgrind_control --instr=on "$parley_pid" >/dev/null
    python3 "$work/drive.py" "$port" "$requests" "$method" "$target" "$session" "$body"
    callgrind_control --instr=off "$parley_pid" >/dev/null
    callgrind_control -d "$parley_pid" >/dev/null
    dump="$(ls -t "$work"/cg."$parley_pid".* 2>/dev/null | head -n 1)"
    count="$(awk '/^totals:/ { print $2 }' "$dump")"
    if [ -n "${BENCH_PROFILE_DIR:-}" ]; then
        mkdir -p "$BENCH_PROFILE_DIR"
        cp "$dump" "$BENCH_PROFILE_DIR/callgrind.$name"
    fi
    awk -v n="$name" -v r="$requests" -v i="$count" 'BEGIN { printf "%-8s %8d requests %12.0f instructions/request\n", n, r, i / r }'
}

measure me GET /parse/users/me "$token" ""
measure username GET "$find_target" "" ""
measure login POST /parse/login "" "$login_body"
