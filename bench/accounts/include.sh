#!/usr/bin/env bash
# Include benchmark: a find of 100 objects each with 2 included pointers (an Author in the
# objects table and a _User) against the same find without include, on the same server in the
# same run. Target (issue 15): with include ≥ 0.5× without (the includes are one statement per
# include path, never one per row).
#
# Starts a temporary PostgreSQL cluster and `parley serve` on it, signs up one user, seeds through
# SQL OBJECTS Author objects and OBJECTS Book objects (public ACLs), each Book pointing at its own
# Author and at the user, checks both finds return 100 objects (the included one with both
# pointers expanded), then for ROUNDS rounds runs `wrk -t2 -cCONNECTIONS -dDURATION` on
# `GET /parse/classes/Book?limit=100` with and without `include=author,reader`, with the user's
# session token, alternating the order. Prints requests/s, the medians and the ratio.
#
# Usage: bench/accounts/include.sh [--no-build]
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (seconds, 1-60, default 10),
#              BENCH_CONNECTIONS (1-128, default 16), OBJECTS (100-100000, default 1000).
# The report also goes to bench/results/include-<time>.txt (not committed).
set -euo pipefail

PARLEY_SCRIPT=bench-include
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
# shellcheck source=bench/accounts/cluster.sh
. "$PARLEY_ROOT/bench/accounts/cluster.sh"
# shellcheck source=bench/accounts/parley.sh
. "$PARLEY_ROOT/bench/accounts/parley.sh"

build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (try --help)" ;;
    esac
    shift
done
rounds=$(parley_int_setting BENCH_ROUNDS 3 1 10)
duration=$(parley_int_setting BENCH_DURATION 10 1 60)
connections=$(parley_int_setting BENCH_CONNECTIONS 16 1 128)
objects=$(parley_int_setting OBJECTS 1000 100 100000)

cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres
for tool in psql wrk awk curl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"
done

work="$(mktemp -d /tmp/parley-bench-include.XXXXXX)"
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

log "starting a temporary PostgreSQL cluster and Parley"
bench_cluster_start "$work"
bench_parley_start "$work" "$build"

signed_up="$(curl -fsS -X POST -H "X-Parse-Application-Id: $parley_app_id" -H 'Content-Type: application/json' \
    -d '{"username":"bench-include","password":"secret-password"}' "$parley_base$parley_mount/users")"
user_id="$(printf '%s' "$signed_up" | python3 -c 'import json, sys; print(json.load(sys.stdin)["objectId"])')"
token="$(printf '%s' "$signed_up" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sessionToken"])')"

log "seeding $objects authors and $objects books"
psql -X -q -v ON_ERROR_STOP=1 -v user="$user_id" -v objects="$objects" <<'SQL'
-- The classes exist (a client may not read a class that does not: allowClientClassCreation is off).
INSERT INTO parse_classes (class_name) VALUES ('Author'), ('Book') ON CONFLICT DO NOTHING;
INSERT INTO objects (class_name, object_id, rperm, wperm, data)
SELECT 'Author', 'a' || lpad(g::text, 9, '0'), '{*}', '{*}', jsonb_build_object('name', 'Author ' || g, 'born', 1900 + g % 100)
FROM generate_series(1, :objects) AS g;
INSERT INTO objects (class_name, object_id, rperm, wperm, data)
SELECT 'Book', 'b' || lpad(g::text, 9, '0'), '{*}', '{*}',
       jsonb_build_object('title', 'Book ' || g, 'n', g,
                          'author', jsonb_build_object('__type', 'Pointer', 'className', 'Author', 'objectId', 'a' || lpad(g::text, 9, '0')),
                          'reader', jsonb_build_object('__type', 'Pointer', 'className', '_User', 'objectId', :'user'))
FROM generate_series(1, :objects) AS g;
VACUUM ANALYZE objects;
SQL

headers=(-H "X-Parse-Application-Id: $parley_app_id" -H "X-Parse-Session-Token: $token")
plain_path="/classes/Book?limit=100"
include_path="/classes/Book?limit=100&include=author,reader"
count="$(curl -fsS "${headers[@]}" "$parley_base$parley_mount$plain_path" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["results"]))')"
[ "$count" = 100 ] || die "GET $plain_path returned $count objects, not 100"
expanded="$(curl -fsS "${headers[@]}" "$parley_base$parley_mount$include_path" | python3 -c '
import json, sys
rows = json.load(sys.stdin)["results"]
print(sum(1 for r in rows if r.get("author", {}).get("__type") == "Object" and r.get("reader", {}).get("__type") == "Object"))')"
[ "$expanded" = 100 ] || die "GET $include_path expanded both pointers of $expanded objects, not 100"

run_wrk() {
    wrk -t2 -c"$connections" -d"$2s" --latency "${headers[@]}" "$parley_base$parley_mount$1" >"$3" 2>&1
    awk '/^Requests\/sec:/ { rps = $2 } /Non-2xx or 3xx responses:/ { bad = $NF } /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
         END { if (bad > 0) { printf "error: %d failed requests\n", bad > "/dev/stderr"; exit 1 } printf "%.0f\n", rps }' "$3"
}

log "warming up"
run_wrk "$include_path" 2 "$work/warm.txt" >/dev/null
run_wrk "$plain_path" 2 "$work/warm.txt" >/dev/null

say ""
say "Find of 100 of $objects objects with 2 pointers each, $connections connections, $duration s per run, $rounds rounds"
say "$(printf '%-6s %14s %14s' round include_req_s plain_req_s)"
include_results=()
plain_results=()
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then
        include_rps="$(run_wrk "$include_path" "$duration" "$work/include-$round.txt")"
        plain_rps="$(run_wrk "$plain_path" "$duration" "$work/plain-$round.txt")"
    else
        plain_rps="$(run_wrk "$plain_path" "$duration" "$work/plain-$round.txt")"
        include_rps="$(run_wrk "$include_path" "$duration" "$work/include-$round.txt")"
    fi
    include_results+=("$include_rps")
    plain_results+=("$plain_rps")
    say "$(printf '%-6s %14s %14s' "$round" "$include_rps" "$plain_rps")"
done

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
include_median="$(median "${include_results[@]}")"
plain_median="$(median "${plain_results[@]}")"
say ""
say "include median: $include_median requests/s"
say "plain median:   $plain_median requests/s"
say "ratio include/plain: $(awk -v a="$include_median" -v b="$plain_median" 'BEGIN { printf "%.2f", a / b }') (target >= 0.50)"
say "include latency (last round): $(awk '$1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 } END { print "p50 " p50 ", p99 " p99 }' "$work/include-$rounds.txt")"

mkdir -p bench/results
cp "$report" "bench/results/include-$(date -u +%Y%m%dT%H%M%SZ).txt"
