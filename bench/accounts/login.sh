#!/usr/bin/env bash
# Logins per second against the raw argon2id verification rate on every core, measured in the
# same run: `POST /parse/login` (wrk -t2, two connections per core so the hashing pool always has
# queued work but waits stay short, BENCH_DURATION seconds) against
# `parley bench-argon2` (one verifier per core, same duration, the server's default argon2id
# parameters: libsodium interactive, 2 passes, 64 MiB). Each login verifies once and inserts a
# session. Prints both rates and the ratio (target >= 0.9). Loopback only; stops what it starts.
#
# Usage: bench/accounts/login.sh [--no-build]
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (1-60 s, default 10).
set -euo pipefail
PARLEY_SCRIPT=bench-accounts-login
# shellcheck source=bench/accounts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

connections=$(( $(nproc) * 2 ))
start_parley
signup bench-login secret-password >/dev/null
cat >"$work/login.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"username":"bench-login","password":"secret-password"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Parse-Application-Id"] = "$app_id"
LUA

login_rates=()
argon_rates=()
measure_logins() {
    wrk -t2 -c"$connections" -d"${duration}s" --timeout 30s -s "$work/login.lua" "http://127.0.0.1:$port/parse/login" >"$work/wrk.txt"
    if grep -qE "Non-2xx" "$work/wrk.txt"; then cat "$work/wrk.txt"; die "some logins failed"; fi
    login_rates+=("$(requests_per_second "$work/wrk.txt")")
}
measure_argon2() {
    "$parley_bin" bench-argon2 --seconds "$duration" >"$work/argon.json"
    argon_rates+=("$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["verifies_per_second"])' "$work/argon.json")")
}
# Alternate which goes first, so a change in background load biases neither side.
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then measure_logins; measure_argon2; else measure_argon2; measure_logins; fi
    echo "  round $round: logins/s ${login_rates[-1]}, argon2id verifies/s ${argon_rates[-1]}"
done
login_median="$(printf '%s\n' "${login_rates[@]}" | median)"
argon_median="$(printf '%s\n' "${argon_rates[@]}" | median)"
ratio="$(python3 -c "print(f'{$login_median / $argon_median:.3f}')")"
echo "POST /parse/login      logins/s: ${login_rates[*]}  (median $login_median)"
echo "argon2id verify, all cores /s: ${argon_rates[*]}  (median $argon_median)"
echo "ratio login/argon2id: $ratio (target >= 0.9)"
