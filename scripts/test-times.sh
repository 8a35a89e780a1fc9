#!/usr/bin/env bash
# Prints where a scripts/test.sh run spent its time, from its log: every suite's seconds (slowest
# first), the build's own "Build complete" seconds, and the N slowest XCTest cases.
#
# Usage: scripts/test-times.sh LOG [N]   (N slowest XCTest cases, default 20)
set -euo pipefail

log_file="${1:?usage: scripts/test-times.sh LOG [N]}"
slowest="${2:-20}"
[ -r "$log_file" ] || { echo "test-times: cannot read $log_file" >&2; exit 1; }

echo "suites (seconds, slowest first):"
sed -nE 's/^=== (.+): (passed|FAILED, exit [0-9]+) \(([0-9]+) s\)$/\3 \1 \2/p' "$log_file" | sort -rn | awk '{ printf "%6d  %s %s\n", $1, $2, ($3 == "passed" ? "" : "FAILED") }'
sed -nE 's/^=== summary \(([0-9]+) s\)$/  total \1 s/p' "$log_file"

echo
echo "builds (swift build's own seconds):"
sed -nE "s/^Build (of product '([^']+)' )?complete! \(([0-9.]+)s\)$/  \3  \2/p" "$log_file"

echo
echo "slowest $slowest XCTest cases (seconds):"
sed -nE "s/^Test Case '([^']+)' (passed|failed) \(([0-9.]+) seconds\)$/\3 \1/p" "$log_file" | sort -rn | head -n "$slowest" | awk '{ printf "%8.3f  %s\n", $1, $2 }'
sed -nE "s/^Test Case '([^']+)' (passed|failed) \(([0-9.]+) seconds\)$/\3/p" "$log_file" | awk '{ s += $1 } END { printf "  %d cases, %.0f s in all\n", NR, s }'
