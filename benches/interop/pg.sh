#!/usr/bin/env bash
# A throwaway PostgreSQL server on a loopback port, for the postgres example
# and the interop bench (tests/postgres.rs starts its own):
#
#   bash benches/interop/pg.sh start [PORT]   # default 55432; prints the conninfo
#   bash benches/interop/pg.sh stop  [PORT]
#
# Debian's postgresql package (scripts/test.sh installs it); initdb and
# postgres run as the postgres user in /tmp/coro-pg-bench-PORT, trust auth,
# fsync off. Run as root (or as postgres).
set -euo pipefail
cmd=${1:?start or stop} port=${2:-55432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x $bin/initdb ]] || { echo "pg.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
dir=/tmp/coro-pg-bench-$port
as_pg() { if [[ $(id -u) == 0 ]]; then setpriv --reuid=postgres --regid=postgres --clear-groups -- "$@"; else "$@"; fi; }
case $cmd in
  start)
    rm -rf "$dir"; mkdir -p "$dir"; [[ $(id -u) == 0 ]] && chown postgres "$dir"
    as_pg "$bin/initdb" -A trust -U postgres --no-sync -E UTF8 -D "$dir/data" >/dev/null
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
      -o "-p $port -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50 -k $dir" start >/dev/null
    echo "host=127.0.0.1 port=$port user=postgres dbname=postgres"
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    rm -rf "$dir"
    ;;
  *) echo "pg.sh: start or stop" >&2; exit 2 ;;
esac
