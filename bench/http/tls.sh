#!/usr/bin/env bash
# HTTPS benchmark: Parley's own TLS listener against nginx with the same certificate (EC P-256,
# made here with openssl), the same protocols and TLS 1.2 ciphers, 2 workers each, in one
# invocation. Three measurements, alternating which server goes first each round:
#   keepalive   wrk -t2 -c64 --latency over https, GET /health on kept-alive connections
#   handshakes  the same with `Connection: close`: every request is a new TLS handshake (wrk
#               never resumes sessions), so requests/s is full handshakes per second
#   memory      RSS growth per idle TLS connection (BENCH_IDLE connections, default 2000, each
#               after one request), beside Parley's plain-HTTP figure
# Prints the medians and the Parley/nginx ratios (issue 16 asks >= 0.9x for the first two).
#
# Usage: bench/http/tls.sh [--no-build] [--mode keepalive|handshakes|memory|all]
#   --no-build  use the existing .build/release/parley
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (seconds, 1-60, default 10),
#   BENCH_IDLE (idle connections for the memory mode, 100-20000, default 2000).
# The report also goes to bench/results/https-<time>.txt (not committed).
set -euo pipefail

PARLEY_SCRIPT=bench-https
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=bench/http/nginx-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/nginx-config.sh"

build=1
mode=all
while [ "$#" -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        --mode) shift; mode="${1:-}" ;;
        -h | --help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
    shift
done
case "$mode" in keepalive | handshakes | memory | all) ;; *) die "--mode: keepalive, handshakes, memory or all" ;; esac

rounds=$(parley_int_setting BENCH_ROUNDS 3 1 10)
duration=$(parley_int_setting BENCH_DURATION 10 1 60)
idle=$(parley_int_setting BENCH_IDLE 2000 100 20000)
wrk_threads=2
wrk_connections=64

cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
for tool in wrk curl openssl python3 "$nginx_bin"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"
done
python="$PARLEY_ROOT/.venv/bin/python"
[ -x "$python" ] || python=python3

work="$(mktemp -d /tmp/parley-bench-https.XXXXXX)"
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

say() { printf '%s\n' "$*" | tee -a "$report"; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_ready() {
    local name="$1" pid="$2" url="$3" deadline=$((SECONDS + $4))
    while [ "$SECONDS" -lt "$deadline" ]; do
        kill -0 "$pid" 2>/dev/null || { tail -n 40 "$work/$name.log" >&2; return 1; }
        curl -fsS -o /dev/null --max-time 1 --cacert "$work/cert.pem" --resolve "bench.parley.test:${url##*:}:127.0.0.1" \
            "https://bench.parley.test:${url##*:}/health" 2>/dev/null && return 0
        sleep 0.2
    done
    tail -n 40 "$work/$name.log" >&2
    return 1
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

rss_kib() {
    local pid total=0
    for pid in "$@"; do total=$((total + $(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0))); done
    printf '%s\n' "$total"
}

nginx_pids() {
    printf '%s\n' "$nginx_pid"
    ps -o pid= --ppid "$nginx_pid" | tr -d ' '
}

# --- The certificate both servers serve (self-signed, a name, EC P-256). ---
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
    -days 2 -subj /CN=bench.parley.test -addext subjectAltName=DNS:bench.parley.test 2>/dev/null

# --- nginx. ---
nginx_port="$(free_port)"
write_nginx_config "$work/nginx" "$nginx_port" 'worker_processes 2;' "$work/cert.pem" "$work/key.pem"
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" >"$work/nginx.log" 2>&1 &
nginx_pid=$!
wait_ready nginx "$nginx_pid" "https://127.0.0.1:$nginx_port" 10 || die "nginx did not start"

# --- Parley: TLS on its own port, plain on --port (for the memory comparison). ---
if [ "$build" -eq 1 ]; then
    log "building Parley (release)"
    swift build -c release --product parley
fi
parley_bin="${PARLEY_BIN:-$PARLEY_ROOT/.build/release/parley}"
[ -x "$parley_bin" ] || die "no $parley_bin (drop --no-build)"
parley_plain_port="$(free_port)"
parley_port="$(free_port)"
env -u DATABASE_URL PARLEY_HOST=127.0.0.1 PARLEY_LOG_LEVEL="${PARLEY_LOG_LEVEL:-warning}" \
    "$parley_bin" serve --port "$parley_plain_port" --tls-port "$parley_port" --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" \
    --threads 2 --data-dir "$work/parley-data" >"$work/parley.log" 2>&1 &
parley_pid=$!
log "waiting up to 60 s for Parley (embedded PostgreSQL starts first)"
wait_ready parley "$parley_pid" "https://127.0.0.1:$parley_port" 60 || die "Parley did not become ready"

port_of() { if [ "$1" = nginx ]; then printf '%s' "$nginx_port"; else printf '%s' "$parley_port"; fi; }
pids_of() { if [ "$1" = nginx ]; then nginx_pids; else printf '%s\n' "$parley_pid"; fi; }

# wrk connects to the URL's host and does not verify certificates; both servers serve their
# only certificate, so the URL names 127.0.0.1.
# measure KIND NAME ROUND: one wrk run; appends "kind name round rps p50 p99 errors".
measure() {
    local kind="$1" name="$2" round="$3" out="$work/wrk-$1-$2-$3.txt" extra=()
    [ "$kind" = handshakes ] && extra=(-H "Connection: close")
    wrk -t"$wrk_threads" -c"$wrk_connections" -d"${duration}s" --latency "${extra[@]}" "https://127.0.0.1:$(port_of "$name")/health" >"$out"
    awk -v kind="$kind" -v name="$name" -v round="$round" '
        /^Requests\/sec:/ { rps = $2 }
        $1 == "50%" { p50 = $2 }
        $1 == "99%" { p99 = $2 }
        /Socket errors:/ { gsub(/,/, ""); errors += $4 + $6 + $8 + $10 }
        /Non-2xx or 3xx responses:/ { errors += $NF }
        END { printf "%s %s %s %.0f %s %s %d\n", kind, name, round, rps, p50, p99, errors }' "$out" >>"$work/results.txt"
}

# idle_growth PORT TLS PID...: RSS growth per connection while $idle connections sit idle.
idle_growth() {
    local port="$1" tls="$2"
    shift 2
    "$python" - "$port" "$tls" "$idle" "$@" <<'PY'
import asyncio, ssl, sys, time
port, tls, count, pids = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3]), [int(p) for p in sys.argv[4:]]
def rss():
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except OSError:
            pass
    return total
async def main():
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    async def one():
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context if tls else None)
        writer.write(b"GET /health HTTP/1.1\r\nHost: bench\r\n\r\n")
        await reader.readuntil(b"}")
        return writer
    before = rss()
    writers = []
    for start in range(0, count, 200):
        writers += await asyncio.gather(*(one() for _ in range(min(200, count - start))))
    await asyncio.sleep(1)
    print(f"{(rss() - before) / count:.1f}")
    for writer in writers:
        writer.close()
asyncio.run(main())
PY
}

say "HTTPS benchmark ($mode): wrk -t$wrk_threads -c$wrk_connections -d${duration}s, $rounds rounds, loopback, EC P-256 certificate"
say "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo); wrk shares the cores with the servers"
say "nginx: $("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'), worker_processes 2, ssl_session_cache off, tickets on"
say "parley: $(git -C "$PARLEY_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), --threads 2; $(openssl version)"
for server in nginx parley; do
    say "$server: $(echo | openssl s_client -brief -connect "127.0.0.1:$(port_of "$server")" -servername bench.parley.test 2>&1 \
        | awk -F': ' '/^Protocol version/ { p = $2 } /^Ciphersuite/ { c = $2 } END { print p, c }')"
done

kinds=()
case "$mode" in all) kinds=(keepalive handshakes) ;; keepalive | handshakes) kinds=("$mode") ;; esac
: >"$work/results.txt"
for kind in "${kinds[@]}"; do
    log "$kind: warming up (2 s each)"
    for server in nginx parley; do wrk -t"$wrk_threads" -c"$wrk_connections" -d2s "https://127.0.0.1:$(port_of "$server")/health" >/dev/null; done
    for round in $(seq 1 "$rounds"); do
        order=(nginx parley)
        [ $((round % 2)) -eq 0 ] && order=(parley nginx)
        for server in "${order[@]}"; do
            log "$kind round $round: $server"
            measure "$kind" "$server" "$round"
        done
    done
done

if [ "${#kinds[@]}" -gt 0 ]; then
    say ""
    say "$(printf '%-11s %-6s %-7s %12s %10s %10s %7s' kind round server 'req/s' p50 p99 errors)"
    while read -r kind name round rps p50 p99 errors; do
        say "$(printf '%-11s %-6s %-7s %12s %10s %10s %7s' "$kind" "$round" "$name" "$rps" "$p50" "$p99" "$errors")"
    done < <(sort -k1,1 -k3,3n -k2,2 "$work/results.txt")
    say ""
    for kind in "${kinds[@]}"; do
        mapfile -t n < <(awk -v k="$kind" '$1 == k && $2 == "nginx" { print $4 }' "$work/results.txt")
        mapfile -t p < <(awk -v k="$kind" '$1 == k && $2 == "parley" { print $4 }' "$work/results.txt")
        nm="$(median "${n[@]}")"
        pm="$(median "${p[@]}")"
        say "$(awk -v k="$kind" -v n="$nm" -v p="$pm" 'BEGIN { printf "%-11s median nginx %.0f, parley %.0f req/s: parley/nginx %.2fx", k, n, p, (n > 0 ? p / n : 0) }')"
    done
    errors="$(awk '{ e += $7 } END { print e + 0 }' "$work/results.txt")"
    [ "$errors" -eq 0 ] || say "warning: $errors socket errors or non-2xx responses (see the errors column)"
fi

if [ "$mode" = all ] || [ "$mode" = memory ]; then
    mapfile -t npids < <(nginx_pids)
    say ""
    say "memory per idle connection ($idle connections, one request each, RSS growth):"
    say "  parley TLS   $(idle_growth "$parley_port" 1 "$parley_pid") KiB"
    say "  parley plain $(idle_growth "$parley_plain_port" 0 "$parley_pid") KiB"
    say "  nginx TLS    $(idle_growth "$nginx_port" 1 "${npids[@]}") KiB"
fi

mkdir -p "$PARLEY_ROOT/bench/results"
result_file="$PARLEY_ROOT/bench/results/https-$(date -u +%Y%m%dT%H%M%SZ).txt"
cp "$report" "$result_file"
log "report saved to ${result_file#"$PARLEY_ROOT"/}"
