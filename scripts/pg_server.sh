#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests and benchmarks, on 127.0.0.1 only.
#
#   scripts/pg_server.sh start [DIR]   # initdb in DIR (default: a new temp dir), start, print the URL
#   scripts/pg_server.sh stop DIR      # stop the server and remove DIR
#
# `start` installs Debian's postgresql package when no server binaries are found (root only;
# the package's own cluster is not created). The cluster trusts local connections (it listens
# on 127.0.0.1 and a socket inside DIR) and holds a database `trove_test`; its URL is written to
# DIR/url and printed on stdout. When `start` fails, DIR may hold a half-made cluster: run
# `stop DIR` all the same. A server runs as user postgres when started by root (PostgreSQL
# refuses to run as root).
# Environment: TROVE_PG_PORT (the port; unset: the first free one from 55432 up).
set -euo pipefail

say() { printf 'pg_server.sh: %s\n' "$*" >&2; }

bindir() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && { echo "$d"; return 0; }
    done
    return 1
}

as_owner() {
    # Run a server binary as the cluster's owner: PostgreSQL refuses to run as root.
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install_server() {
    # postgresql-common first, so the package's default cluster (a second server on 5432,
    # started at install time) is never created; then the server and its extensions.
    local apt=(apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold)
    say "installing Debian's postgresql package"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" postgresql-common >&2
    sed -ri 's/^#?\s*create_main_cluster\s*=.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" postgresql postgresql-contrib >&2
}

port_busy() {
    # Something accepts connections on 127.0.0.1:$1 (bash's /dev/tcp: no extra tools needed).
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local dir="${1:-}" port="${TROVE_PG_PORT:-55432}" tries=1 bin out
    [ -n "${TROVE_PG_PORT:-}" ] || tries=50
    if ! bin="$(bindir)"; then
        [ "$(id -u)" = 0 ] || { say "no PostgreSQL server binaries; install Debian's postgresql package"; exit 2; }
        install_server
        bin="$(bindir)" || { say "postgresql installed but no server binaries found"; exit 2; }
    fi
    [ -n "$dir" ] || dir="$(mktemp -d /tmp/trove-pg.XXXXXX)"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    chmod 700 "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
    fi
    while :; do
        if [ "$tries" -gt 1 ] && port_busy "$port"; then
            tries=$((tries - 1)); port=$((port + 1)); continue
        fi
        : > "$dir/server.log"
        [ "$(id -u)" = 0 ] && chown postgres: "$dir/server.log"
        if out="$(as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
            start 2>&1)"; then
            break
        fi
        # Another server took the port between the check and the start: try the next one.
        if [ "$tries" -gt 1 ] && grep -q "could not create any TCP/IP sockets" "$dir/server.log"; then
            tries=$((tries - 1)); port=$((port + 1)); continue
        fi
        say "pg_ctl: $out"
        say "server log ($dir/server.log):"
        sed 's/^/    /' "$dir/server.log" >&2
        # Last, the one line a caller quotes: the server's fatal error if it logged one.
        say "no server started on 127.0.0.1:$port: $(grep -m1 -oE '(FATAL|PANIC): .*' "$dir/server.log" || echo "see the log above")"
        exit 1
    done
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -qAt -c "SELECT 1 FROM pg_database WHERE datname='trove_test'" \
        | grep -q 1 || as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres trove_test
    # Tests connect as `trove`, who may create schemas but not tables in public: a test that forgets
    # its own schema fails loudly instead of leaving tables that other schemas' search paths find.
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d trove_test -qAt >/dev/null <<'SQL'
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trove') THEN CREATE ROLE trove LOGIN; END IF;
END $$;
GRANT CREATE, CONNECT ON DATABASE trove_test TO trove;
CREATE EXTENSION IF NOT EXISTS unaccent SCHEMA public;
SQL
    echo "postgresql://trove@127.0.0.1:$port/trove_test" | tee "$dir/url"
}

stop() {
    local dir="${1:?usage: pg_server.sh stop DIR}" bin
    if bin="$(bindir)" && [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 \
            || as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 \
            || { say "could not stop the server in $dir; left it in place"; exit 1; }
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    *) say "usage: pg_server.sh start [DIR] | stop DIR"; exit 2 ;;
esac
