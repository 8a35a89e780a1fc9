#!/usr/bin/env bash
# Deterministic companion to run.sh: user-space instructions per request, counted by
# valgrind's callgrind on the server processes while wrk drives GET /health, for Parley and
# for nginx (one process, see below). Unlike requests/s, instructions per request barely
# move when other processes load the machine, so small hot-path changes can be compared.
# Both servers run under valgrind (slowly, one thread at a time): the counts are what matters,
# not the request rate. Counting is switched on only while wrk runs (startup is excluded).
#
# Usage: bench/http/instructions.sh [--no-build] [--nginx-only] [--parley-only]
#   --no-build     use the existing .build/release/parley
# Environment: BENCH_ROUNDS (1-10, default 2), BENCH_DURATION (seconds, 1-60, default 5),
#   BENCH_PROFILE_DIR (keep the callgrind dumps there, for callgrind_annotate),
#   PARLEY_BIN (another parley binary, e.g. one built with other flags; implies --no-build).
set -euo pipefail

PARLEY_SCRIPT=bench-instructions
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=bench/http/nginx-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/nginx-config.sh"

with_parley=1
with_nginx=1
build=1
for argument in "$@"; do
    case "$argument" in
        --nginx-only) with_parley=0 ;;
        --parley-only) with_nginx=0 ;;
        --no-build) build=0 ;;
        -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $argument (try --help)" ;;
    esac
done

rounds=$(parley_int_setting BENCH_ROUNDS 2 1 10)
duration=$(parley_int_setting BENCH_DURATION 5 1 60)

cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
for tool in wrk curl valgrind callgrind_control python3 "$nginx_bin"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (apt-get install valgrind)"
done

work="$(mktemp -d /tmp/parley-bench-instructions.XXXXXX)"
chmod 755 "$work"
nginx_pid=""
parley_pid=""

stop_process() {
    local pid="$1" signal="$2" waited=0
    [ -n "$pid" ] || return 0
    kill -s "$signal" "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 100 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -0 "$pid" 2>/dev/null && kill -s KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    stop_process "$parley_pid" TERM
    stop_process "$nginx_pid" QUIT
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_ready() {
    local name="$1" pid="$2" url="$3" deadline=$((SECONDS + $4))
    while [ "$SECONDS" -lt "$deadline" ]; do
        kill -0 "$pid" 2>/dev/null || { tail -n 40 "$work/$name.log" >&2; return 1; }
        curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
        sleep 0.2
    done
    tail -n 40 "$work/$name.log" >&2
    return 1
}

servers=()
if [ "$with_nginx" -eq 1 ]; then
    nginx_port="$(free_port)"
    # valgrind cannot be controlled in forked workers, so nginx runs as one process here
    # (master_process off): its per-request work is that of one of run.sh's two workers.
    write_nginx_config "$work/nginx" "$nginx_port" 'master_process off;'
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg-nginx.%p" \
        "$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" >"$work/nginx.log" 2>&1 &
    nginx_pid=$!
    wait_ready nginx "$nginx_pid" "http://127.0.0.1:$nginx_port/health" 60 || die "nginx did not start"
    servers+=(nginx)
fi

if [ "$with_parley" -eq 1 ]; then
    if [ "$build" -eq 1 ] && [ -z "${PARLEY_BIN:-}" ]; then
        log "building Parley (release)"
        swift build -c release --product parley
    fi
    parley_bin="${PARLEY_BIN:-$PARLEY_ROOT/.build/release/parley}"
    [ -x "$parley_bin" ] || die "no $parley_bin (drop --no-build)"
    parley_port="$(free_port)"
    env -u DATABASE_URL PARLEY_HOST=127.0.0.1 PARLEY_LOG_LEVEL=warning \
        valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg-parley.%p" \
        "$parley_bin" serve --port "$parley_port" --threads 2 --data-dir "$work/parley-data" >"$work/parley.log" 2>&1 &
    parley_pid=$!
    wait_ready parley "$parley_pid" "http://127.0.0.1:$parley_port/health" 180 || die "Parley did not start"
    servers+=(parley)
fi

url_of() { if [ "$1" = nginx ]; then printf 'http://127.0.0.1:%s/health' "$nginx_port"; else printf 'http://127.0.0.1:%s/health' "$parley_port"; fi; }
pids_of() {
    if [ "$1" = nginx ]; then
        printf '%s\n' "$nginx_pid"
    else
        printf '%s\n' "$parley_pid"
    fi
}

# callgrind COMMAND PID...: sends a command to each valgrind'ed process.
callgrind() {
    local command="$1" pid
    shift
    for pid in "$@"; do callgrind_control "$command" "$pid" >/dev/null 2>&1 || die "callgrind_control $command $pid failed"; done
}

for server in "${servers[@]}"; do wrk -t2 -c64 -d2s "$(url_of "$server")" >/dev/null; done

printf '%-7s %-6s %10s %14s\n' server round requests 'instructions/request'
for round in $(seq 1 "$rounds"); do
    for server in "${servers[@]}"; do
        out="$work/$server-$round"
        mapfile -t pids < <(pids_of "$server")
        callgrind -z "${pids[@]}"
        callgrind --instr=on "${pids[@]}"
        wrk -t2 -c64 -d"${duration}s" "$(url_of "$server")" >"$out.wrk"
        callgrind --instr=off "${pids[@]}"
        callgrind -d "${pids[@]}"
        requests="$(awk '/requests in/ { print $1 }' "$out.wrk")"
        instructions=0
        for pid in "${pids[@]}"; do
            # The newest dump of each process holds the counts since the -z above.
            dump="$(ls -t "$work/cg-$server.$pid".* 2>/dev/null | head -n 1)"
            [ -n "$dump" ] || continue
            count="$(awk '/^totals:/ { print $2 }' "$dump")"
            instructions=$((instructions + ${count:-0}))
            if [ -n "${BENCH_PROFILE_DIR:-}" ]; then
                mkdir -p "$BENCH_PROFILE_DIR"
                cp "$dump" "$BENCH_PROFILE_DIR/callgrind.$server.$round.$pid"
            fi
        done
        awk -v s="$server" -v r="$round" -v n="$requests" -v i="$instructions" \
            'BEGIN { printf "%-7s %-6s %10d %14.0f\n", s, r, n, (n > 0 ? i / n : 0) }'
    done
done
