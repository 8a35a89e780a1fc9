# shellcheck shell=bash
# The nginx reference of the HTTP benchmarks: a fixed 200 with Parley's /health body.
# write_nginx_config DIR PORT PROCESS_DIRECTIVE writes DIR/nginx.conf; PROCESS_DIRECTIVE is
# `worker_processes 2;` for run.sh or `master_process off;` for instructions.sh (valgrind).
write_nginx_config() {
    local dir="$1" port="$2" process_directive="$3"
    mkdir -p "$dir"
    cat >"$dir/nginx.conf" <<EOF
$process_directive
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    server {
        listen 127.0.0.1:$port reuseport;
        location = /health {
            default_type application/json;
            return 200 '{"status":"ok"}';
        }
    }
}
EOF
}
