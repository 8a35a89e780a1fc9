# shellcheck shell=bash
# Shared by bench/files/download.sh and upload.sh: a temporary work directory, a Parley
# (release, embedded PostgreSQL, disk file storage) on a free port, process helpers.
PARLEY_SCRIPT="${PARLEY_SCRIPT:-bench-files}"
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
cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres

work="$(mktemp -d /tmp/parley-bench-files.XXXXXX)"
chmod 755 "$work"
report="$work/report.txt"
parley_pid=""
extra_pids=()
app_id=bench-files
master_key=bench-master

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
    local pid
    for pid in "${extra_pids[@]}"; do stop_process "$pid" QUIT; done
    stop_process "$parley_pid" TERM
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s\n' "$*" | tee -a "$report"; }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_url() {
    local pid="$1" url="$2" deadline=$((SECONDS + 90))
    while [ "$SECONDS" -lt "$deadline" ]; do
        kill -0 "$pid" 2>/dev/null || { tail -n 40 "$work"/*.log >&2; die "process $pid exited before $url answered"; }
        curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
        sleep 0.2
    done
    die "$url did not answer within 90 s"
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# vm_hwm_kib PID: the peak resident set size of PID.
vm_hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# start_parley [FLAGS...]: a release Parley on $parley_port with its files under $work/parley-data/files.
start_parley() {
    if [ "$build" -eq 1 ]; then
        log "building Parley (release)"
        swift build -c release --product parley
    fi
    local bin="$PARLEY_ROOT/.build/release/parley"
    [ -x "$bin" ] || die "no $bin (drop --no-build)"
    parley_port="$(free_port)"
    env -u DATABASE_URL PARLEY_HOST=127.0.0.1 PARLEY_LOG_LEVEL="${PARLEY_LOG_LEVEL:-warning}" PARLEY_APP_ID="$app_id" \
        PARLEY_MASTER_KEY="$master_key" "$bin" serve --port "$parley_port" --threads 2 --data-dir "$work/parley-data" "$@" \
        >"$work/parley.log" 2>&1 &
    parley_pid=$!
    log "waiting for Parley on port $parley_port (embedded PostgreSQL starts first)"
    wait_url "$parley_pid" "http://127.0.0.1:$parley_port/health"
}

# upload_file PATH NAME: uploads PATH with the master key; prints the file URL.
upload_file() {
    curl -fsS -H "X-Parse-Application-Id: $app_id" -H "X-Parse-Master-Key: $master_key" -H "Content-Type: application/octet-stream" \
        -H "Expect:" --data-binary "@$1" "http://127.0.0.1:$parley_port/parse/files/$2" \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["url"])'
}
