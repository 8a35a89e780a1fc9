# Temporary PostgreSQL cluster for the accounts benchmarks. Source it; do not run it.
# shellcheck shell=bash
#
# bench_cluster_start DIR   initdb + start in DIR/pg, listening only on a unix socket in DIR/pg;
#                           exports PGHOST PGPORT PGUSER PGDATABASE for psql and pgbench.
#                           fsync/synchronous_commit off (faster seeding; reads are unaffected);
#                           every other setting is PostgreSQL's default, as for `parley serve`'s
#                           embedded cluster. As root the server runs as the `postgres` account.
# bench_cluster_stop        stops it (idempotent).
# bench_apply_migrations    applies migrations/*.sql in order with psql (for runs without Parley).

bench_cluster_dir=""
bench_as_owner=()

bench_cluster_start() {
    bench_cluster_dir="$1/pg"
    mkdir -p "$bench_cluster_dir"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' account for the server"
        chown -R postgres: "$bench_cluster_dir"
        chmod 755 "$1"
        bench_as_owner=(runuser -u postgres --)
    fi
    "${bench_as_owner[@]}" initdb -D "$bench_cluster_dir/data" -U postgres --encoding=UTF8 --locale=C.UTF-8 --lc-collate=C \
        --auth-local=trust --auth-host=reject --no-sync --no-instructions >"$bench_cluster_dir/initdb.log" 2>&1 \
        || { tail -n 20 "$bench_cluster_dir/initdb.log" >&2; die "initdb failed"; }
    PGPORT=5432
    "${bench_as_owner[@]}" pg_ctl -D "$bench_cluster_dir/data" -l "$bench_cluster_dir/server.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$bench_cluster_dir' -c port=$PGPORT -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start >/dev/null || { tail -n 20 "$bench_cluster_dir/server.log" >&2; die "PostgreSQL did not start"; }
    export PGHOST="$bench_cluster_dir" PGPORT PGUSER=postgres PGDATABASE=postgres
}

bench_cluster_stop() {
    [ -n "$bench_cluster_dir" ] && [ -f "$bench_cluster_dir/data/postmaster.pid" ] || return 0
    "${bench_as_owner[@]}" pg_ctl -D "$bench_cluster_dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

bench_apply_migrations() {
    local file
    for file in "$PARLEY_ROOT"/migrations/[0-9]*.sql; do
        psql -X -q -v ON_ERROR_STOP=1 -f "$file" >/dev/null || die "migration $file failed"
    done
}

# percentile P FILE: the P-th percentile (nearest rank) of the numbers in FILE, one per line.
bench_percentile() {
    sort -n "$2" | awk -v p="$1" '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit } r = int((p / 100) * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR; print v[r] }'
}
