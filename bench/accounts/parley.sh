# Parley server for the accounts benchmarks. Source it after cluster.sh; do not run it.
# shellcheck shell=bash
#
# bench_parley_start WORK BUILD   builds .build/release/parley when BUILD is 1 (or uses $PARLEY_BIN),
#                                 starts `parley serve` on a free loopback port against the
#                                 benchmark cluster (--database-url; Parley applies the migrations),
#                                 waits for /health; sets parley_pid and parley_base (http://host:port).
# bench_parley_stop               stops it (idempotent).
# bench_parley_serves_users       0 when GET <mount>/users answers 200 with results.
# bench_parley_http_latency NAME WORK   wrk, one connection, 10 s, bench/accounts/NAME.lua; prints
#                                 p50/p99 and requests/s, or why it could not run.

parley_pid=""
parley_base=""
parley_app_id="${PARLEY_APP_ID:-parley}"
parley_mount="${PARLEY_MOUNT_PATH:-/parse}"

bench_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

bench_parley_start() {
    local work="$1" build="$2" bin port deadline
    bin="${PARLEY_BIN:-$PARLEY_ROOT/.build/release/parley}"
    if [ -z "${PARLEY_BIN:-}" ] && [ "$build" -eq 1 ]; then
        log "building Parley (release)"
        (cd "$PARLEY_ROOT" && swift build -c release --product parley) >"$work/build.log" 2>&1 \
            || { tail -n 30 "$work/build.log" >&2; die "swift build failed"; }
    fi
    [ -x "$bin" ] || die "no $bin (build it, or set PARLEY_BIN)"
    port="$(bench_free_port)"
    env -u DATABASE_URL PARLEY_LOG_LEVEL="${PARLEY_LOG_LEVEL:-warning}" \
        "$bin" serve --host 127.0.0.1 --port "$port" --threads 2 --data-dir "$work/parley-data" \
        --database-url "postgresql:///$PGDATABASE?host=$PGHOST&port=$PGPORT&user=$PGUSER" \
        --app-id "$parley_app_id" --mount-path "$parley_mount" >"$work/parley.log" 2>&1 &
    parley_pid=$!
    parley_base="http://127.0.0.1:$port"
    deadline=$((SECONDS + 60))
    until curl -fsS -o /dev/null --max-time 1 "$parley_base/health" 2>/dev/null; do
        if ! kill -0 "$parley_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 30 "$work/parley.log" >&2
            die "Parley did not answer $parley_base/health"
        fi
        sleep 0.2
    done
}

bench_parley_stop() {
    [ -n "$parley_pid" ] || return 0
    kill "$parley_pid" 2>/dev/null || true
    wait "$parley_pid" 2>/dev/null || true
    parley_pid=""
}

bench_parley_serves_users() {
    local body
    body="$(curl -sS --max-time 5 -H "X-Parse-Application-Id: $parley_app_id" \
        "$parley_base$parley_mount/users?limit=1" 2>/dev/null)" || return 1
    case "$body" in *'"results"'*) return 0 ;; *) return 1 ;; esac
}

bench_parley_http_latency() {
    local name="$1" work="$2" out
    command -v wrk >/dev/null 2>&1 || { echo "HTTP: wrk not found, skipped"; return 0; }
    if ! bench_parley_serves_users; then
        echo "HTTP: TODO: $parley_base$parley_mount/users does not answer queries in this build; skipped"
        return 0
    fi
    out="$work/wrk-$name.txt"
    PARLEY_APP_ID="$parley_app_id" PARLEY_MOUNT_PATH="$parley_mount" \
        wrk -t1 -c1 -d10s --latency -s "$PARLEY_ROOT/bench/accounts/$name.lua" "$parley_base" >"$out" 2>&1
    awk -v name="$name" '
        $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 } /^Requests\/sec:/ { rps = $2 }
        /Non-2xx or 3xx responses:/ { bad = $NF }
        END { printf "HTTP GET %s (wrk, 1 connection, 10 s): p50 %s, p99 %s, %s requests/s, non-2xx %d\n", name, p50, p99, rps, bad + 0 }' "$out"
}
