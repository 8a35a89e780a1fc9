#!/usr/bin/env bash
# Session-authenticated read vs the cheapest endpoint: `GET /parse/users/me` with a valid session
# token against `GET /health`, on the same server in the same run (wrk -t2 -c64, BENCH_DURATION
# seconds each, alternating order for BENCH_ROUNDS rounds). Prints requests/s, the medians and
# the ratio me/health (target >= 0.8). For reference it also measures `OPTIONS /parse/users`, an
# async route that touches nothing (the floor of any Parse endpoint: task hop, CORS headers).
# Loopback only; everything started is stopped on exit.
#
# Usage: bench/accounts/me.sh [--no-build]
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (1-60 s, default 10).
set -euo pipefail
PARLEY_SCRIPT=bench-accounts-me
# shellcheck source=bench/accounts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start_parley
token="$(signup bench-me secret-password)"
headers=(-H "X-Parse-Application-Id: $app_id" -H "X-Parse-Session-Token: $token")
curl -fsS "${headers[@]}" "http://127.0.0.1:$port/parse/users/me" >/dev/null || die "GET /users/me failed"

me_rates=()
health_rates=()
for round in $(seq 1 "$rounds"); do
    for target in me health; do
        [ $((round % 2)) -eq 0 ] && target=$([ "$target" = me ] && echo health || echo me)
        if [ "$target" = me ]; then
            wrk -t2 -c64 -d"${duration}s" --latency "${headers[@]}" "http://127.0.0.1:$port/parse/users/me" >"$work/wrk.txt"
            me_rates+=("$(requests_per_second "$work/wrk.txt")")
        else
            wrk -t2 -c64 -d"${duration}s" --latency "http://127.0.0.1:$port/health" >"$work/wrk.txt"
            health_rates+=("$(requests_per_second "$work/wrk.txt")")
        fi
        grep -E "Requests/sec|Non-2xx|Socket errors|  50%|  99%" "$work/wrk.txt" | sed "s/^/  round $round $target: /"
    done
done
printf 'wrk.method = "OPTIONS"\n' >"$work/options.lua"
wrk -t2 -c64 -d"${duration}s" -s "$work/options.lua" "http://127.0.0.1:$port/parse/users" >"$work/wrk.txt"
options_rate="$(requests_per_second "$work/wrk.txt")"
me_median="$(printf '%s\n' "${me_rates[@]}" | median)"
health_median="$(printf '%s\n' "${health_rates[@]}" | median)"
ratio="$(python3 -c "print(f'{$me_median / $health_median:.3f}')")"
echo "GET /parse/users/me  req/s: ${me_rates[*]}  (median $me_median)"
echo "GET /health          req/s: ${health_rates[*]}  (median $health_median)"
echo "OPTIONS /parse/users req/s: $options_rate (async no-op floor, one run)"
echo "ratio me/health: $ratio (target >= 0.8)"
