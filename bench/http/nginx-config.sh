# shellcheck shell=bash
# The nginx reference of the HTTP benchmarks: a fixed 200 with Parley's /health body.
# write_nginx_config DIR PORT PROCESS_DIRECTIVE [CERT KEY] writes DIR/nginx.conf;
# PROCESS_DIRECTIVE is `worker_processes 2;` for run.sh or `master_process off;` for
# instructions.sh (valgrind). With CERT and KEY the listener speaks TLS the way Parley's does
# (tls.sh): TLS 1.2 and 1.3, Parley's TLS 1.2 cipher list, session tickets on, no session cache.
write_nginx_config() {
    local dir="$1" port="$2" process_directive="$3" cert="${4:-}" key="${5:-}" listen_tls="" tls_settings=""
    mkdir -p "$dir"
    if [ -n "$cert" ]; then
        listen_tls=" ssl"
        tls_settings="ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;
        ssl_prefer_server_ciphers on;
        ssl_session_cache off;
        ssl_session_tickets on;"
    fi
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
        listen 127.0.0.1:$port$listen_tls reuseport;
        $tls_settings
        location = /health {
            default_type application/json;
            return 200 '{"status":"ok"}';
        }
    }
}
EOF
}
