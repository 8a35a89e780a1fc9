#!/usr/bin/env bash
# Nearby benchmark: latency of the compiled "users within N km, nearest first" query
# ($nearSphere + $maxDistanceInKilometers, GiST-backed) over a million users.
#
# Starts a temporary PostgreSQL cluster, applies migrations/, seeds USERS users with random
# GeoPoints (generate_series + random() + ll_to_earth, straight into `users`: about 82 users per
# km² over a 111 km × 110 km area around Paris), then runs the exact SQL QueryCompiler emits
# (bench/accounts/nearby.sql, kept identical by QueryBenchScriptTests) through pgbench -M prepared
# from one client for TRANSACTIONS random centres per radius, after a warm-up, and prints p50/p99/
# max latency from pgbench's per-transaction log, the plan of one query, and the throughput with
# two clients, for 1 km, 500 m and 20 km. Target: p99 < 10 ms at 1 km.
#
# With --parley it also starts .build/release/parley serve on the same database and measures
# GET /parse/users?where={"location":{"$nearSphere":…}} with wrk (one connection, 10 s, random
# centres from bench/accounts/nearby.lua), when the server answers that route.
#
# Usage: bench/accounts/nearby.sh [--users N] [--transactions N] [--parley] [--no-build]
# The report also goes to bench/results/nearby-<time>.txt (not committed).
set -euo pipefail

PARLEY_SCRIPT=bench-nearby
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=bench/accounts/cluster.sh
. "$PARLEY_ROOT/bench/accounts/cluster.sh"

users=1000000
transactions=2000
with_parley=0
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --users) users="$2"; shift ;;
        --transactions) transactions="$2"; shift ;;
        --parley) with_parley=1 ;;
        --no-build) build=0 ;;
        -h | --help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
    shift
done
if ! [[ "$users" =~ ^[0-9]+$ ]] || [ "$users" -lt 1000 ] || [ "$users" -gt 10000000 ]; then die "--users must be 1000-10000000"; fi
if ! [[ "$transactions" =~ ^[0-9]+$ ]] || [ "$transactions" -lt 100 ] || [ "$transactions" -gt 100000 ]; then
    die "--transactions must be 100-100000"
fi

cd "$PARLEY_ROOT"
parley_use_postgres
for tool in initdb pg_ctl psql pgbench awk; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"
done

work="$(mktemp -d /tmp/parley-bench-nearby.XXXXXX)"
chmod 755 "$work"
report="$work/report.txt"
parley_pid=""
cleanup() {
    if [ -n "$parley_pid" ]; then kill "$parley_pid" 2>/dev/null || true; wait "$parley_pid" 2>/dev/null || true; fi
    bench_cluster_stop
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { printf '%s\n' "$*" | tee -a "$report"; }

log "starting a temporary PostgreSQL cluster in $work"
bench_cluster_start "$work"

if [ "$with_parley" -eq 1 ]; then
    # Parley migrates the database itself at startup; seeding follows.
    # shellcheck source=bench/accounts/parley.sh
    . "$PARLEY_ROOT/bench/accounts/parley.sh"
    bench_parley_start "$work" "$build"
else
    bench_apply_migrations
fi

log "seeding $users users with random GeoPoints"
seed_start=$SECONDS
psql -X -q -v ON_ERROR_STOP=1 -v users="$users" <<'SQL'
SELECT setseed(0.42);
INSERT INTO users (object_id, username, data, geo)
SELECT lpad(g::text, 10, '0'), 'user' || g,
       jsonb_build_object('screenName', 'User ' || g,
                          'location', jsonb_build_object('__type', 'GeoPoint', 'latitude', lat, 'longitude', lng)),
       ll_to_earth(lat, lng)
FROM (SELECT g, 48.35 + random() AS lat, 1.6 + random() * 1.5 AS lng FROM generate_series(1, :users) AS g) AS seed;
VACUUM ANALYZE users;
SQL
say "seeded $users users in $((SECONDS - seed_start)) s ($(psql -X -At -c "SELECT pg_size_pretty(pg_total_relation_size('users'))") with indexes)"

# run_pgbench KM CLIENTS TRANSACTIONS LOG_PREFIX: pgbench over nearby.sql; prints its output.
run_pgbench() {
    local chord   # the radius as QueryCompiler binds it: the unit-sphere chord of km / 6371 radians
    chord="$(awk -v km="$1" 'BEGIN { printf "%.17g", 2 * sin(km / 6371 / 2) }')"
    local args=(-n -M prepared -c "$2" -j "$2" -t "$3" -f bench/accounts/nearby.sql -D 'p1={*}'
                -D 'p2={"location":{"__type":"GeoPoint"}}' -D "p5=$chord")
    if [ -n "$4" ]; then args+=(--log "--log-prefix=$4"); fi
    pgbench "${args[@]}" 2>&1
}

# The statement of nearby.sql with :pN written $N, for PREPARE.
nearby_sql="$(grep '^SELECT' bench/accounts/nearby.sql | sed -E 's/:p([0-9])/$\1/g; s/;$//')"

say ""
say "Nearby query over $users users, $transactions random centres per radius, pgbench -M prepared, 1 client"
say "(rows: median rows returned, limit 100)"
say "$(printf '%-8s %10s %10s %10s %10s %6s' radius p50_ms p99_ms max_ms mean_ms rows)"
for km in 1 0.5 20; do
    run_pgbench "$km" 1 500 "" >/dev/null
    rm -f "$work"/latency.*
    run_pgbench "$km" 1 "$transactions" "$work/latency" >"$work/pgbench-$km.txt"
    cat "$work"/latency.* | awk '{ print $3 / 1000 }' >"$work/latency-$km.ms"
    rows="$(psql -X -At -v km="$km" <<'SQL'
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY n) FROM (
    SELECT (SELECT count(*) FROM (SELECT 1 FROM users
                                  WHERE earth_box(ll_to_earth(lat, lng), :km / 6371.0 * earth()) @> geo
                                    AND earth_distance(ll_to_earth(lat, lng), geo) <= :km / 6371.0 * earth()
                                  LIMIT 100) AS hits) AS n
    FROM (SELECT 48.45 + random() * 0.8 AS lat, 1.8 + random() * 1.1 AS lng FROM generate_series(1, 50)) AS centres) AS counts;
SQL
)"
    say "$(printf '%-8s %10s %10s %10s %10s %6s' "${km}km" "$(bench_percentile 50 "$work/latency-$km.ms")" \
        "$(bench_percentile 99 "$work/latency-$km.ms")" "$(sort -n "$work/latency-$km.ms" | tail -n 1)" \
        "$(awk '{ s += $1 } END { printf "%.3f", s / NR }' "$work/latency-$km.ms")" "$rows")"
done

tps="$(run_pgbench 1 2 "$transactions" "" | awk '/^tps =/ { print $3; exit }')"
say ""
say "throughput at 1 km with 2 clients (2 cores): $tps queries/s"

say ""
say "plans of a 20 km query (the custom plan that runs, then the generic plan, which the plan cache rejects: estimated at about 2000x the custom one):"
psql -X -At <<SQL | grep -E 'Scan|Sort|Limit|Order By|Index Cond|Execution' | sed 's/^/    /' | tee -a "$report"
PREPARE nearby(text[], jsonb, float8, float8, float8) AS $nearby_sql;
EXPLAIN (ANALYZE, COSTS OFF) EXECUTE nearby('{*}', '{"location":{"__type":"GeoPoint"}}', 48.8566, 2.3522, 2 * sin(20 / 6371.0 / 2));
SET plan_cache_mode = force_generic_plan;
EXPLAIN (ANALYZE, COSTS OFF) EXECUTE nearby('{*}', '{"location":{"__type":"GeoPoint"}}', 48.8566, 2.3522, 2 * sin(20 / 6371.0 / 2));
SQL

if [ "$with_parley" -eq 1 ]; then
    say ""
    bench_parley_http_latency nearby "$work" | tee -a "$report"
fi

mkdir -p bench/results
cp "$report" "bench/results/nearby-$(date -u +%Y%m%dT%H%M%SZ).txt"
