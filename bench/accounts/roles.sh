#!/usr/bin/env bash
# Role ACL benchmark: a find on a class whose objects are readable through a role (the user holds
# 3 roles, 2 of them inherited) against the same find on a class whose objects name the user's id,
# on the same server in the same run. Target: roles ≥ 0.8× user-id ACLs.
#
# Starts a temporary PostgreSQL cluster and `parley serve` on it, signs up one user, seeds through
# SQL three roles (the user is a member of Members; Staff's `roles` relation holds Members and
# Admins' holds Staff, so the user holds all three) and OBJECTS objects in each of RoleNote
# (ACL role:Admins) and UserNote (ACL the user's id), announces the role change (NOTIFY, as
# `RoleStore.rolesChanged` does), checks both finds return 100 objects, then for ROUNDS rounds
# runs `wrk -t2 -cCONNECTIONS -dDURATION` on `GET /parse/classes/<class>?limit=100` with the
# user's session token, alternating the order. Prints requests/s, the medians and the ratio.
#
# Usage: bench/accounts/roles.sh [--no-build]
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (seconds, 1-60, default 10),
#              BENCH_CONNECTIONS (1-128, default 16), OBJECTS (100-100000, default 1000).
# The report also goes to bench/results/roles-<time>.txt (not committed).
set -euo pipefail

PARLEY_SCRIPT=bench-roles
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
        -h | --help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

work="$(mktemp -d /tmp/parley-bench-roles.XXXXXX)"
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
    -d '{"username":"bench-roles","password":"secret-password"}' "$parley_base$parley_mount/users")"
user_id="$(printf '%s' "$signed_up" | python3 -c 'import json, sys; print(json.load(sys.stdin)["objectId"])')"
token="$(printf '%s' "$signed_up" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sessionToken"])')"

log "seeding 3 roles and $objects objects per class"
psql -X -q -v ON_ERROR_STOP=1 -v user="$user_id" -v objects="$objects" <<'SQL'
-- The classes exist (a client may not read a class that does not: allowClientClassCreation is off).
INSERT INTO parse_classes (class_name) VALUES ('RoleNote'), ('UserNote') ON CONFLICT DO NOTHING;
INSERT INTO objects (class_name, object_id, data) VALUES
    ('_Role', 'roleMember', '{"name":"Members"}'), ('_Role', 'roleStaff', '{"name":"Staff"}'), ('_Role', 'roleAdmin', '{"name":"Admins"}');
INSERT INTO "_Join:users:_Role" ("relatedId", "owningId") VALUES (:'user', 'roleMember');
INSERT INTO "_Join:roles:_Role" ("relatedId", "owningId") VALUES ('roleMember', 'roleStaff'), ('roleStaff', 'roleAdmin');
INSERT INTO objects (class_name, object_id, acl, rperm, wperm, data)
SELECT 'RoleNote', 'r' || lpad(g::text, 9, '0'), '{"role:Admins":{"read":true}}', '{role:Admins}', '{role:Admins}', jsonb_build_object('n', g)
FROM generate_series(1, :objects) AS g;
INSERT INTO objects (class_name, object_id, acl, rperm, wperm, data)
SELECT 'UserNote', 'u' || lpad(g::text, 9, '0'), jsonb_build_object(:'user', '{"read":true}'::jsonb), ARRAY[:'user'], ARRAY[:'user'], jsonb_build_object('n', g)
FROM generate_series(1, :objects) AS g;
VACUUM ANALYZE objects;
SELECT pg_notify('parley_accounts', '{"event":"rolesChanged"}');
SQL

headers=(-H "X-Parse-Application-Id: $parley_app_id" -H "X-Parse-Session-Token: $token")
for class in RoleNote UserNote; do
    deadline=$((SECONDS + 10))
    until [ "$(curl -fsS "${headers[@]}" "$parley_base$parley_mount/classes/$class?limit=100" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["results"]))')" = 100 ]; do
        [ "$SECONDS" -lt "$deadline" ] || die "GET /classes/$class?limit=100 does not return 100 objects to the user"
        sleep 0.2
    done
done

run_wrk() {
    wrk -t2 -c"$connections" -d"$2s" --latency "${headers[@]}" "$parley_base$parley_mount/classes/$1?limit=100" >"$3" 2>&1
    awk '/^Requests\/sec:/ { rps = $2 } /Non-2xx or 3xx responses:/ { bad = $NF } /Socket errors:/ { gsub(/,/, ""); bad += $4 + $6 + $8 + $10 }
         END { if (bad > 0) { printf "error: %d failed requests\n", bad > "/dev/stderr"; exit 1 } printf "%.0f\n", rps }' "$3"
}

log "warming up"
run_wrk RoleNote 2 "$work/warm.txt" >/dev/null
run_wrk UserNote 2 "$work/warm.txt" >/dev/null

say ""
say "Find of 100 of $objects objects, $connections connections, $duration s per run, $rounds rounds"
say "$(printf '%-6s %14s %14s' round roles_req_s user_id_req_s)"
role_results=()
user_results=()
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then
        role_rps="$(run_wrk RoleNote "$duration" "$work/role-$round.txt")"
        user_rps="$(run_wrk UserNote "$duration" "$work/user-$round.txt")"
    else
        user_rps="$(run_wrk UserNote "$duration" "$work/user-$round.txt")"
        role_rps="$(run_wrk RoleNote "$duration" "$work/role-$round.txt")"
    fi
    role_results+=("$role_rps")
    user_results+=("$user_rps")
    say "$(printf '%-6s %14s %14s' "$round" "$role_rps" "$user_rps")"
done

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
role_median="$(median "${role_results[@]}")"
user_median="$(median "${user_results[@]}")"
say ""
say "roles median:   $role_median requests/s"
say "user-id median: $user_median requests/s"
say "ratio roles/user-id: $(awk -v a="$role_median" -v b="$user_median" 'BEGIN { printf "%.2f", a / b }') (target >= 0.80)"

mkdir -p bench/results
cp "$report" "bench/results/roles-$(date -u +%Y%m%dT%H%M%SZ).txt"
