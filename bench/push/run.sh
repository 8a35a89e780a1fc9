#!/usr/bin/env bash
# Push drain benchmark (see bench/push/run.py): builds Parley (release) unless --no-build, then
# drains 100,000 queued push jobs to a local sink and prints jobs/s and gateway requests/s.
#
# Usage: bench/push/run.sh [--no-build] [run.py options: --jobs N --batch-size N --concurrency N --sink nginx|python --rounds N]
set -euo pipefail

PARLEY_SCRIPT=bench-push
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

mkdir -p "$PARLEY_ROOT/bench/results"
parley_run_bench_driver 2,6p bench/push/run.py "$@" | tee "$PARLEY_ROOT/bench/results/push-$(date -u +%Y%m%dT%H%M%SZ).txt"
