#!/usr/bin/env bash
# Push drain benchmark (see bench/push/run.py): builds Parley (release) unless --no-build, then
# drains 100,000 queued push jobs to a local sink and prints jobs/s and gateway requests/s.
#
# Usage: bench/push/run.sh [--no-build] [run.py options: --jobs N --batch-size N --concurrency N --sink nginx|python --rounds N]
set -euo pipefail

PARLEY_SCRIPT=bench-push
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

build=1
arguments=()
for argument in "$@"; do
    case "$argument" in
        --no-build) build=0 ;;
        -h | --help) sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
python="$PARLEY_ROOT/.venv/bin/python"
[ -x "$python" ] || python=python3
mkdir -p bench/results
PARLEY_BIN="${PARLEY_BIN:-$PARLEY_ROOT/.build/release/parley}" "$python" bench/push/run.py "${arguments[@]+"${arguments[@]}"}" \
    | tee "bench/results/push-$(date -u +%Y%m%dT%H%M%SZ).txt"
