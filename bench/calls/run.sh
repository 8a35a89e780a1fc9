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

parley_run_bench_driver 2,11p bench/calls/run.py "$@"
