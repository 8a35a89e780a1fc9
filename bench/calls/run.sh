#!/usr/bin/env bash
# Call-setup benchmark: 1,000 call setups per second (invite → incoming → ringing → answer →
# answered → hangup) between online users over /v1/socket, driven by bench/calls/callbench.c (a C epoll client) through bench/calls/run.py
# . Builds Parley (release),
# starts a throwaway PostgreSQL and `parley serve`, and prints p50/p90/p99/max of
# invite→incoming and answer→answered, the achieved rate and the server's CPU per call.
# Target: p99 < 5 ms. Numbers depend on the machine being otherwise idle (the load average is
# printed with them); record them in docs/performance.md.
#
# Usage: bench/calls/run.sh [--no-build] [run.py options: --rate N --duration S --pairs N --threads N]
set -euo pipefail

PARLEY_SCRIPT=bench-calls
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

build=1
arguments=()
for argument in "$@"; do
    case "$argument" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) arguments+=("$argument") ;;
    esac
done

cd "$PARLEY_ROOT"
parley_use_swift
parley_use_postgres
[ -x "$PARLEY_VENV/bin/python" ] || die "no venv at $PARLEY_VENV: run scripts/setup.sh"
if [ "$build" -eq 1 ]; then
    swift build -c release --product parley
fi
PARLEY_BIN="$PARLEY_ROOT/.build/release/parley" exec "$PARLEY_VENV/bin/python" bench/calls/run.py "${arguments[@]+"${arguments[@]}"}"
