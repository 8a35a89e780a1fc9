#!/usr/bin/env bash
# Username lookup benchmark: GET /parse/users?where={"username":…} through Parley against the
# same prepared SELECT run directly by pgbench, with the same number of connections, in one run.
# This is the lookup a calling app makes to show a caller's name. Target: Parley ≥ 0.7× pgbench.
#
# Starts a temporary PostgreSQL cluster and `parley serve` on it (Parley applies the migrations),
# seeds 100,000 users through SQL (usernames "1".."100000"), then for ROUNDS rounds runs, in
# alternating order, `wrk -t2 -cCONNECTIONS -dDURATION` with bench/accounts/username.lua (random
# usernames, anonymous; each thread formats REQUEST_POOL of them once and cycles) and
# `pgbench -M prepared -cCONNECTIONS -j2 -TDURATION` over bench/accounts/username.sql (the SQL
# QueryCompiler emits, kept identical by QueryBenchScriptTests). Prints requests/s of each, the
# medians and the ratio.
#
# Usage: bench/accounts/username.sh [--pgbench-only] [--no-build]
#        bench/accounts/username.sh --url http://host:port --database-url URL [--app-id ID] [--seed]
#   --pgbench-only  no Parley: measures pgbench alone (checks the harness and the SQL)
#   --no-build      use the existing .build/release/parley (or set PARLEY_BIN)
#   --url           a running server whose database is --database-url (seeded with --seed;
#                   otherwise it must already hold users "1".."100000")
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (seconds, 1-60, default 10),
#              BENCH_CONNECTIONS (1-128, default 16), PARLEY_APP_ID (default parley),
#              REQUEST_POOL (random requests each wrk thread prepares, default 20000).
# The report also goes to bench/results/username-<time>.txt (not committed).
set -euo pipefail

PARLEY_SCRIPT=bench-username
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=bench/accounts/cluster.sh
. "$PARLEY_ROOT/bench/accounts/cluster.sh"
# shellcheck source=bench/accounts/parley.sh
. "$PARLEY_ROOT/bench/accounts/parley.sh"

users=100000
mode=self
build=1
seed_external=0
external_url=""
external_database=""
database_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --pgbench-only) mode=pgbench ;;
        --no-build) build=0 ;;
        --url) mode=external; external_url="$2"; shift ;;
        --database-url) external_database="$2"; shift ;;
        --app-id) parley_app_id="$2"; shift ;;
        --seed) seed_external=1 ;;
        -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
    shift
done
rounds=$(parley_int_setting BENCH_ROUNDS 3 1 10)
duration=$(parley_int_setting BENCH_DURATION 10 1 60)
connections=$(parley_int_setting BENCH_CONNECTIONS 16 1 128)
if [ "$mode" = external ] && [ -z "$external_database" ]; then die "--url needs --database-url (for pgbench and seeding)"; fi

cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres
for tool in psql pgbench awk curl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"
done
[ "$mode" = pgbench ] || command -v wrk >/dev/null 2>&1 || die "wrk not found: run scripts/setup.sh"

work="$(mktemp -d /tmp/parley-bench-username.XXXXXX)"
chmod 755 "$work"
report="$work/report.txt"
cleanup() {
    bench_parley_stop
    bench_cluster_stop
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { printf '%s\n' "$*" | tee -a "$report"; }

seed() {
    log "seeding $users users"
    psql -X -q -v ON_ERROR_STOP=1 -v users="$users" "${database_args[@]}" <<'SQL'
INSERT INTO users (object_id, username, data)
SELECT lpad(g::text, 10, 'u'), g::text, jsonb_build_object('screenName', 'User ' || g, 'age', 18 + g % 60)
FROM generate_series(1, :users) AS g
ON CONFLICT DO NOTHING;
VACUUM ANALYZE users;
SQL
}

case "$mode" in
    self)
        log "starting a temporary PostgreSQL cluster and Parley"
        bench_cluster_start "$work"
        bench_parley_start "$work" "$build"
        seed
        ;;
    pgbench)
        log "starting a temporary PostgreSQL cluster"
        bench_cluster_start "$work"
        bench_apply_migrations
        seed
        ;;
    external)
        parley_base="$external_url"
        database_args=(-d "$external_database")
        if [ "$seed_external" -eq 1 ]; then seed; fi
        ;;
esac

http=0
if [ "$mode" != pgbench ]; then
    if bench_parley_serves_users; then
        http=1
        sample="$(curl -sS -H "X-Parse-Application-Id: $parley_app_id" "$parley_base$parley_mount/users?where=%7B%22username%22%3A%2242%22%7D")"
        case "$sample" in *'"username":"42"'*) ;; *) die "GET /users?where={\"username\":\"42\"} did not return user 42: $sample" ;; esac
    else
        say "HTTP: TODO: $parley_base$parley_mount/users does not answer queries in this build; measuring pgbench only"
    fi
fi

run_wrk() {
    USERNAME_COUNT="$users" PARLEY_APP_ID="$parley_app_id" PARLEY_MOUNT_PATH="$parley_mount" \
        wrk -t2 -c"$connections" -d"$1s" --latency -s bench/accounts/username.lua "$parley_base" >"$2" 2>&1
    awk '/^Requests\/sec:/ { rps = $2 } /Non-2xx or 3xx responses:/ { bad = $NF } /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
         END { if (bad > 0) { printf "error: %d failed requests\n", bad > "/dev/stderr"; exit 1 } printf "%.0f\n", rps }' "$2"
}

run_pgbench() {
    pgbench -n -M prepared -c "$connections" -j 2 -T "$1" -f bench/accounts/username.sql -D 'p1={*}' \
        "${database_args[@]:1}" >"$2" 2>&1 \
        || { cat "$2" >&2; die "pgbench failed"; }
    awk '/^tps =/ { printf "%.0f\n", $3; exit }' "$2"
}

log "warming up"
run_pgbench 3 "$work/warm-pgbench.txt" >/dev/null
if [ "$http" -eq 1 ]; then run_wrk 3 "$work/warm-wrk.txt" >/dev/null; fi

say ""
say "Username lookup over $users users, $connections connections, $duration s per run, $rounds rounds"
say "$(printf '%-6s %14s %14s' round parley_req_s pgbench_tps)"
parley_results=()
pgbench_results=()
for round in $(seq 1 "$rounds"); do
    parley_rps="-"
    if [ $((round % 2)) -eq 1 ]; then
        if [ "$http" -eq 1 ]; then parley_rps="$(run_wrk "$duration" "$work/wrk-$round.txt")"; fi
        pgbench_tps="$(run_pgbench "$duration" "$work/pgbench-$round.txt")"
    else
        pgbench_tps="$(run_pgbench "$duration" "$work/pgbench-$round.txt")"
        if [ "$http" -eq 1 ]; then parley_rps="$(run_wrk "$duration" "$work/wrk-$round.txt")"; fi
    fi
    [ "$parley_rps" = "-" ] || parley_results+=("$parley_rps")
    pgbench_results+=("$pgbench_tps")
    say "$(printf '%-6s %14s %14s' "$round" "$parley_rps" "$pgbench_tps")"
done

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
pgbench_median="$(median "${pgbench_results[@]}")"
say ""
say "pgbench median: $pgbench_median queries/s"
if [ "${#parley_results[@]}" -gt 0 ]; then
    parley_median="$(median "${parley_results[@]}")"
    say "Parley median:  $parley_median requests/s"
    say "ratio Parley/pgbench: $(awk -v a="$parley_median" -v b="$pgbench_median" 'BEGIN { printf "%.2f", a / b }') (target >= 0.70)"
    say "Parley latency (last round): $(awk '$1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 } END { print "p50 " p50 ", p99 " p99 }' "$work/wrk-$rounds.txt")"
fi

mkdir -p bench/results
cp "$report" "bench/results/username-$(date -u +%Y%m%dT%H%M%SZ).txt"
