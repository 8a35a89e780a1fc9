#!/usr/bin/env bash
# HTTP benchmark: Parley's GET /health against nginx serving the same fixed JSON body, on
# this machine, in one invocation. Builds Parley (release), starts it with an embedded
# PostgreSQL in a temporary data directory, starts nginx (worker_processes 2) from a
# generated config, then runs `wrk -t2 -c64 -d10s --latency` against each, alternating which
# goes first, for 3 rounds. Prints requests/s, latency, and CPU seconds per 100k requests
# (utime+stime from /proc, nginx master and workers, Parley's process), the medians and the
# Parley/nginx ratios. Loopback only; bounded; everything it starts is stopped on exit.
#
# Usage: bench/http/run.sh [--nginx-only] [--no-build]
#   --nginx-only  benchmark only the nginx reference (checks the harness without Parley)
#   --no-build    use the existing .build/release/parley
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (seconds, 1-60, default 10).
# The report also goes to bench/results/http-<time>.txt (not committed).
set -euo pipefail

PARLEY_SCRIPT=bench-http
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=bench/http/nginx-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/nginx-config.sh"

with_parley=1
build=1
for argument in "$@"; do
    case "$argument" in
        --nginx-only) with_parley=0 ;;
        --no-build) build=0 ;;
        -h | --help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $argument (try --help)" ;;
    esac
done

rounds=$(parley_int_setting BENCH_ROUNDS 3 1 10)
duration=$(parley_int_setting BENCH_DURATION 10 1 60)
wrk_threads=2
wrk_connections=64
ready_timeout=60

cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
for tool in wrk curl python3 getconf "$nginx_bin"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"
done
clock_ticks="$(getconf CLK_TCK)"

work="$(mktemp -d /tmp/parley-bench-http.XXXXXX)"
# The embedded PostgreSQL may run as another user; let it reach its data directory.
chmod 755 "$work"
report="$work/report.txt"
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
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid did not stop in 10 s; killing it"
        kill -s KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    stop_process "$parley_pid" TERM
    stop_process "$nginx_pid" QUIT
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s\n' "$*" | tee -a "$report"; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_ready NAME PID URL SECONDS: waits until URL answers 200, or fails if PID exits.
wait_ready() {
    local name="$1" pid="$2" url="$3" limit="$4" deadline=$((SECONDS + $4))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "$name exited before it answered $url; its log:"
            tail -n 40 "$work/$name.log" >&2 || true
            return 1
        fi
        if curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    log "$name did not answer $url within $limit s; its log:"
    tail -n 40 "$work/$name.log" >&2 || true
    return 1
}

# cpu_ticks PID...: utime+stime of the processes, in clock ticks (gone processes count 0).
cpu_ticks() {
    local pid total=0 ticks
    for pid in "$@"; do
        ticks="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }')" || ticks=0
        total=$((total + ${ticks:-0}))
    done
    printf '%s\n' "$total"
}

nginx_pids() {
    printf '%s\n' "$nginx_pid"
    ps -o pid= --ppid "$nginx_pid" | tr -d ' '
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# --- nginx: the reference, a fixed 200 with the same body. ---
nginx_port="$(free_port)"
write_nginx_config "$work/nginx" "$nginx_port" 'worker_processes 2;'
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" >"$work/nginx.log" 2>&1 &
nginx_pid=$!
nginx_url="http://127.0.0.1:$nginx_port/health"
wait_ready nginx "$nginx_pid" "$nginx_url" 10 || die "nginx did not start"

# --- Parley. ---
parley_url=""
if [ "$with_parley" -eq 1 ]; then
    if [ "$build" -eq 1 ]; then
        log "building Parley (release)"
        swift build -c release --product parley
    fi
    parley_bin="$PARLEY_ROOT/.build/release/parley"
    [ -x "$parley_bin" ] || die "no $parley_bin (drop --no-build)"
    parley_port="$(free_port)"
    env -u DATABASE_URL PARLEY_HOST=127.0.0.1 PARLEY_LOG_LEVEL="${PARLEY_LOG_LEVEL:-warning}" \
        "$parley_bin" serve --port "$parley_port" --threads 2 --data-dir "$work/parley-data" \
        >"$work/parley.log" 2>&1 &
    parley_pid=$!
    parley_url="http://127.0.0.1:$parley_port/health"
    log "waiting up to $ready_timeout s for Parley on $parley_url (embedded PostgreSQL starts first)"
    wait_ready parley "$parley_pid" "$parley_url" "$ready_timeout" \
        || die "Parley did not become ready: it must serve GET /health (see its log above)"
fi

# --- Measure. ---
# measure NAME URL ROUND: one wrk run; appends "name round rps p50 p99 cpu errors" to results.
measure() {
    local name="$1" url="$2" round="$3" out="$work/wrk-$1-$3.txt" before after pids
    if [ "$name" = nginx ]; then mapfile -t pids < <(nginx_pids); else pids=("$parley_pid"); fi
    before="$(cpu_ticks "${pids[@]}")"
    wrk -t"$wrk_threads" -c"$wrk_connections" -d"${duration}s" --latency "$url" >"$out"
    after="$(cpu_ticks "${pids[@]}")"
    awk -v name="$name" -v round="$round" -v ticks="$((after - before))" -v hz="$clock_ticks" '
        /requests in/ { requests = $1 }
        /^Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = $2 }
        $1 == "99%" { p99 = $2 }
        /Socket errors:/ { gsub(/,/, ""); errors += $4 + $6 + $8 + $10 }
        /Non-2xx or 3xx responses:/ { errors += $NF }
        END {
            cpu = requests > 0 ? ticks / hz / requests * 100000 : 0
            printf "%s %s %.0f %s %s %.3f %d\n", name, round, rps, p50, p99, cpu, errors
        }' "$out" >>"$work/results.txt"
}

show_response() {
    local name="$1" url="$2" response
    response="$(curl -sS -i "$url" | tr -d '\r')"
    say "$name response ($(printf '%s' "$response" | wc -c) bytes with headers):"
    printf '%s\n' "$response" | sed 's/^/    /' | tee -a "$report"
}

servers=(nginx)
[ "$with_parley" -eq 1 ] && servers+=(parley)
url_of() { if [ "$1" = nginx ]; then printf '%s' "$nginx_url"; else printf '%s' "$parley_url"; fi; }

say "HTTP benchmark: GET /health, wrk -t$wrk_threads -c$wrk_connections -d${duration}s --latency, $rounds rounds, loopback"
say "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo); wrk shares the cores with the servers"
say "nginx: $("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'), worker_processes 2, access_log off"
[ "$with_parley" -eq 1 ] && say "parley: $(git -C "$PARLEY_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), --threads 2, embedded PostgreSQL"
for server in "${servers[@]}"; do show_response "$server" "$(url_of "$server")"; done

log "warming up (2 s each)"
for server in "${servers[@]}"; do
    wrk -t"$wrk_threads" -c"$wrk_connections" -d2s "$(url_of "$server")" >/dev/null
done

: >"$work/results.txt"
for round in $(seq 1 "$rounds"); do
    order=("${servers[@]}")
    if [ $((round % 2)) -eq 0 ] && [ "${#servers[@]}" -eq 2 ]; then order=(parley nginx); fi
    for server in "${order[@]}"; do
        log "round $round: $server"
        measure "$server" "$(url_of "$server")" "$round"
    done
done

say ""
say "$(printf '%-6s %-7s %12s %10s %10s %14s %7s' round server 'req/s' p50 p99 'cpu-s/100k' errors)"
while read -r name round rps p50 p99 cpu errors; do
    say "$(printf '%-6s %-7s %12s %10s %10s %14s %7s' "$round" "$name" "$rps" "$p50" "$p99" "$cpu" "$errors")"
done < <(sort -k2,2n -k1,1 "$work/results.txt")

say ""
declare -A median_rps median_cpu
total_errors=0
for server in "${servers[@]}"; do
    mapfile -t rps_values < <(awk -v s="$server" '$1 == s { print $3 }' "$work/results.txt")
    mapfile -t cpu_values < <(awk -v s="$server" '$1 == s { print $6 }' "$work/results.txt")
    median_rps[$server]="$(median "${rps_values[@]}")"
    median_cpu[$server]="$(median "${cpu_values[@]}")"
    total_errors=$((total_errors + $(awk -v s="$server" '$1 == s { e += $7 } END { print e + 0 }' "$work/results.txt")))
    say "$(printf 'median %-7s %12.0f req/s %10.3f cpu-s/100k' "$server" "${median_rps[$server]}" "${median_cpu[$server]}")"
done
if [ "$with_parley" -eq 1 ]; then
    say "$(awk -v p="${median_rps[parley]}" -v n="${median_rps[nginx]}" -v pc="${median_cpu[parley]}" -v nc="${median_cpu[nginx]}" \
        'BEGIN { printf "ratio parley/nginx: throughput %.2fx, CPU per request %.2fx", (n > 0 ? p / n : 0), (nc > 0 ? pc / nc : 0) }')"
fi
[ "$total_errors" -eq 0 ] || say "warning: $total_errors socket errors or non-2xx responses (see the errors column)"

mkdir -p "$PARLEY_ROOT/bench/results"
result_file="$PARLEY_ROOT/bench/results/http-$(date -u +%Y%m%dT%H%M%SZ).txt"
cp "$report" "$result_file"
log "report saved to ${result_file#"$PARLEY_ROOT"/}"
