#!/usr/bin/env bash
# Files upload benchmark: BENCH_UPLOADS (default 100) uploads of a 10 MB file to Parley (disk
# storage: streamed to a temporary file, fdatasync, rename), 4 at a time with curl, against
# `dd` writing the same number of 10 MB files (conv=fdatasync, 4 at a time) into the same
# directory; BENCH_ROUNDS rounds, medians, the Parley/dd throughput ratio (target >= 0.5x).
# Then BENCH_CONCURRENT (default 100) concurrent 10 MB uploads and Parley's peak RSS (VmHWM).
# Uploaded files are removed after each round. Loopback only; everything started is stopped.
#
# Usage: bench/files/upload.sh [--no-build]
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_UPLOADS (4-1000, default 100),
# BENCH_CONCURRENT (1-200, default 100).
# The report also goes to bench/results/files-upload-<time>.txt (not committed).
set -euo pipefail
PARLEY_SCRIPT=bench-files-upload
# shellcheck source=bench/files/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
uploads=$(parley_int_setting BENCH_UPLOADS 100 4 1000)
concurrent=$(parley_int_setting BENCH_CONCURRENT 100 1 200)
for tool in curl python3 dd xargs; do command -v "$tool" >/dev/null 2>&1 || die "$tool not found"; done

start_parley --body-timeout 300s --max-upload-size 20971520
files_dir="$work/parley-data/files"
head -c 10000000 /dev/urandom >"$work/upload.bin"
upload_file "$work/upload.bin" warmup.bin >/dev/null

# now_ms: wall clock in milliseconds.
now_ms() { date +%s%3N; }
clear_files() { find "$files_dir" -mindepth 1 -maxdepth 1 -name '*_*' -delete; }
upload_one() {
    curl -fsS -o /dev/null -H "X-Parse-Application-Id: $app_id" -H "X-Parse-Master-Key: $master_key" \
        -H "Content-Type: application/octet-stream" -H "Expect:" --data-binary "@$work/upload.bin" \
        "http://127.0.0.1:$parley_port/parse/files/upload$1.bin"
}
dd_one() { dd if="$work/upload.bin" of="$files_dir/dd$1_x" bs=1M conv=fdatasync status=none; }
export -f upload_one dd_one
export work app_id master_key parley_port files_dir

say "files upload: $uploads x 10 MB, 4 at a time, $rounds rounds, $(nproc) cores; parley $(git rev-parse --short HEAD 2>/dev/null || echo unknown) --threads 2"
say "disk: $(df -h "$files_dir" | awk 'NR == 2 { print $1, $2 }')"
: >"$work/results.txt"
for round in $(seq 1 "$rounds"); do
    clear_files
    start=$(now_ms)
    seq 1 "$uploads" | xargs -P4 -I{} bash -c 'upload_one {}'
    parley_ms=$(( $(now_ms) - start ))
    clear_files
    start=$(now_ms)
    seq 1 "$uploads" | xargs -P4 -I{} bash -c 'dd_one {}'
    dd_ms=$(( $(now_ms) - start ))
    clear_files
    awk -v r="$round" -v p="$parley_ms" -v d="$dd_ms" -v n="$uploads" \
        'BEGIN { printf "%s %.1f %.1f\n", r, n * 10 / (p / 1000), n * 10 / (d / 1000) }' >>"$work/results.txt"
done
while read -r round parley dd; do say "round $round: parley $parley MB/s, dd $dd MB/s"; done <"$work/results.txt"
p="$(median $(awk '{ print $2 }' "$work/results.txt"))"
d="$(median $(awk '{ print $3 }' "$work/results.txt"))"
say "median parley $p MB/s, dd $d MB/s"
say "$(awk -v p="$p" -v d="$d" 'BEGIN { printf "ratio parley/dd: %.2fx (target >= 0.50x)", (d > 0 ? p / d : 0) }')"

before="$(vm_hwm_kib "$parley_pid")"
start=$(now_ms)
seq 1 "$concurrent" | xargs -P"$concurrent" -I{} bash -c 'upload_one c{}'
elapsed=$(( $(now_ms) - start ))
after="$(vm_hwm_kib "$parley_pid")"
stored="$(find "$files_dir" -mindepth 1 -maxdepth 1 -name '*_uploadc*' | wc -l)"
say "$concurrent concurrent 10 MB uploads: $stored stored in ${elapsed} ms; Parley VmHWM $((before / 1024)) MiB before, $((after / 1024)) MiB after"
clear_files
mkdir -p bench/results
cp "$report" "bench/results/files-upload-$(date -u +%Y%m%dT%H%M%SZ).txt"
