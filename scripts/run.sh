#!/usr/bin/env bash
# Sets up, builds (release) and starts Parley in the foreground. Defaults come from the
# server: port 8080, and an embedded PostgreSQL under ./.parley when DATABASE_URL is unset.
#
# Usage: scripts/run.sh [parley serve options...]     e.g. scripts/run.sh --port 9000
set -euo pipefail

PARLEY_SCRIPT=run
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$PARLEY_ROOT"
bash scripts/setup.sh --runtime
parley_use_swift
parley_use_postgres

log "building (release)"
swift build -c release --product parley

log "starting: .build/release/parley serve $*"
exec .build/release/parley serve "$@"
