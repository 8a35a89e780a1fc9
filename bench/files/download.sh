#!/usr/bin/env bash
# Files download benchmark: GET of one 1 MB file, keep-alive, Parley (disk storage, sendfile)
# against nginx (sendfile on, worker_processes 2) serving the same file from Parley's files
# directory, in one invocation. wrk -t2 -c16 -d${BENCH_DURATION}s per server, alternating which
# goes first, BENCH_ROUNDS rounds; prints requests/s, MB/s, the medians and the Parley/nginx
# ratio (target >= 0.8x). Loopback only; everything started is stopped on exit.
#
# Usage: bench/files/download.sh [--no-build]
# Environment: BENCH_ROUNDS (1-10, default 3), BENCH_DURATION (seconds, 1-60, default 10).
# The report also goes to bench/results/files-download-<time>.txt (not committed).
set -euo pipefail
PARLEY_SCRIPT=bench-files-download
# shellcheck source=bench/files/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
for tool in wrk curl python3 "$nginx_bin"; do command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run scripts/setup.sh"; done

start_parley
head -c 1000000 /dev/urandom >"$work/photo.bin"
url="$(upload_file "$work/photo.bin" photo.bin)"
name="${url##*/}"
files_dir="$work/parley-data/files"
[ -f "$files_dir/$name" ] || die "the upload is not in $files_dir"

nginx_port="$(free_port)"
mkdir -p "$work/nginx"
# Parley's files are 0640 in a 0750 directory: nginx's workers read them as the user running this.
user_directive=""
[ "$(id -u)" -eq 0 ] && user_directive="user root;"
cat >"$work/nginx/nginx.conf" <<CONF
$user_directive
worker_processes 2;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000000;
    client_body_temp_path $work/nginx/client_body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen 127.0.0.1:$nginx_port reuseport;
        location /parse/files/$app_id/ { alias $files_dir/; default_type application/octet-stream; etag on; }
    }
}
CONF
"$nginx_bin" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" >"$work/nginx.log" 2>&1 &
nginx_pid=$!
extra_pids+=("$nginx_pid")
nginx_url="http://127.0.0.1:$nginx_port/parse/files/$app_id/$name"
wait_url "$nginx_pid" "$nginx_url"
cmp -s <(curl -fsS "$url") "$work/photo.bin" || die "Parley did not serve the uploaded bytes"
cmp -s <(curl -fsS "$nginx_url") "$work/photo.bin" || die "nginx did not serve the uploaded bytes"

url_of() { if [ "$1" = nginx ]; then printf '%s' "$nginx_url"; else printf '%s' "$url"; fi; }
say "files download: 1 MB file, wrk -t2 -c16 -d${duration}s, keep-alive, $rounds rounds, loopback, $(nproc) cores"
say "nginx: $("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'), sendfile on; parley $(git rev-parse --short HEAD 2>/dev/null || echo unknown), --threads 2"
parley_alive() { kill -0 "$parley_pid" 2>/dev/null || { tail -n 40 "$work/parley.log" >&2; die "Parley exited (its log above)"; }; }
for server in nginx parley; do wrk -t2 -c16 -d2s "$(url_of "$server")" >/dev/null; done
parley_alive
: >"$work/results.txt"
for round in $(seq 1 "$rounds"); do
    order=(nginx parley)
    [ $((round % 2)) -eq 0 ] && order=(parley nginx)
    for server in "${order[@]}"; do
        wrk -t2 -c16 -d"${duration}s" --latency "$(url_of "$server")" >"$work/wrk-$server-$round.txt"
        parley_alive
        awk -v s="$server" -v r="$round" '/^Requests\/sec:/ { rps = $2 } /Non-2xx/ { e += $NF } /Socket errors/ { gsub(/,/, ""); e += $4 + $6 + $8 + $10 }
            END { printf "%s %s %.0f %d\n", s, r, rps, e }' "$work/wrk-$server-$round.txt" >>"$work/results.txt"
    done
done
while read -r server round rps errors; do
    say "$(printf 'round %s %-7s %10s req/s %8.0f MB/s errors %s' "$round" "$server" "$rps" "$(awk -v r="$rps" 'BEGIN { print r }')" "$errors")"
done <"$work/results.txt"
p="$(median $(awk '$1 == "parley" { print $3 }' "$work/results.txt"))"
n="$(median $(awk '$1 == "nginx" { print $3 }' "$work/results.txt"))"
say "median parley $p req/s, nginx $n req/s"
say "$(awk -v p="$p" -v n="$n" 'BEGIN { printf "ratio parley/nginx: %.2fx (target >= 0.80x)", (n > 0 ? p / n : 0) }')"
mkdir -p bench/results
cp "$report" "bench/results/files-download-$(date -u +%Y%m%dT%H%M%SZ).txt"
