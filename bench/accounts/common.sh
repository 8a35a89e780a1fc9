# shellcheck shell=bash
# Shared by bench/accounts/*.sh: builds or finds the release binary, starts `parley serve` with an
# embedded PostgreSQL in a temporary directory on a free loopback port, and stops it on exit.
# Source it after setting PARLEY_SCRIPT; it defines start_parley, signup, stop_process and $work.

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

build=1
for argument in "$@"; do
    case "$argument" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $argument (try --help)" ;;
    esac
done

duration=$(parley_int_setting BENCH_DURATION 10 1 60)
rounds=$(parley_int_setting BENCH_ROUNDS 3 1 10)

cd "$PARLEY_ROOT" || exit 1
parley_use_swift
parley_use_postgres
for tool in wrk curl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"
done
if [ "$build" -eq 1 ] && [ -z "${PARLEY_BIN:-}" ]; then
    swift build -c release --product parley >&2
fi
parley_bin="${PARLEY_BIN:-$PARLEY_ROOT/.build/release/parley}"
[ -x "$parley_bin" ] || die "no release binary at $parley_bin"

work="$(mktemp -d /tmp/parley-bench-accounts.XXXXXX)"
chmod 755 "$work"   # the embedded PostgreSQL may run as another user
parley_pid=""
app_id="bench-app"

stop_process() {
    local pid="$1" waited=0
    [ -n "$pid" ] || return 0
    kill -s TERM "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 150 ]; do sleep 0.1; waited=$((waited + 1)); done
    kill -0 "$pid" 2>/dev/null && kill -s KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    stop_process "$parley_pid"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_parley [serve options...]: starts the server and waits for /ready; sets $port. The
# command runs under "${parley_launcher[@]}" when set (valgrind, say), given parley_ready_seconds.
parley_launcher=()
parley_ready_seconds=120
# shellcheck disable=SC2120
start_parley() {
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    PARLEY_APP_ID="$app_id" "${parley_launcher[@]}" "$parley_bin" serve --host 127.0.0.1 --port "$port" --data-dir "$work/data" \
        --migrations-dir "$PARLEY_ROOT/migrations" --log-level warning "$@" >"$work/parley.log" 2>&1 &
    parley_pid=$!
    local deadline=$((SECONDS + parley_ready_seconds))
    until curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$port/ready" 2>/dev/null; do
        kill -0 "$parley_pid" 2>/dev/null || { tail -n 40 "$work/parley.log" >&2; die "parley exited"; }
        [ "$SECONDS" -lt "$deadline" ] || die "parley not ready in $parley_ready_seconds s"
        sleep 0.2
    done
}

# signup USERNAME PASSWORD: prints the session token.
signup() {
    curl -fsS -X POST -H "X-Parse-Application-Id: $app_id" -H 'Content-Type: application/json' \
        -d "{\"username\":\"$1\",\"password\":\"$2\",\"screenName\":\"Bench\",\"age\":30}" \
        "http://127.0.0.1:$port/parse/users" | python3 -c 'import json, sys; print(json.load(sys.stdin)["sessionToken"])'
}

# requests_per_second WRK_OUTPUT_FILE
requests_per_second() {
    awk '/^Requests\/sec:/ { print $2 }' "$1"
}

median() {
    sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
