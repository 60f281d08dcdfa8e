#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the PostgreSQL store (OAI_BRIDGE_TEST_POSTGRES).
#
#   .ci/postgres.sh            starts one in a new temporary folder, on a free loopback port, and
#                              prints its URL (postgres://postgres@127.0.0.1:PORT/postgres); the
#                              folder is the URL's socket directory, printed on stderr
#   .ci/postgres.sh stop DIR   stops the one in DIR and removes DIR
#
# The server runs as an unprivileged user (PostgreSQL refuses root): as root, the user postgres
# (created if missing); else the current user. Trust authentication on loopback, no fsync: a test
# server, never one for data.
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bindir" ] && [ -x "$bindir/initdb" ] ||
  { echo "no PostgreSQL server in /usr/lib/postgresql/*/bin (apt-get install postgresql-15)" >&2; exit 1; }

as_server() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${1:-}" = stop ]; then
  dir=${2:?usage: .ci/postgres.sh stop DIR}
  as_server "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  exit 0
fi

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd -r -M -d /nonexistent -s /usr/sbin/nologin postgres
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/oai-bridge-pg.XXXXXX")
chmod 755 "$dir"
if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
as_server "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
# A free port: asked of the kernel, then given to the server (a race no test run has lost yet;
# a start that fails on it is tried again on another).
for _ in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
  if as_server "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
    -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c synchronous_commit=off" \
    start >/dev/null 2>&1; then
    echo "$dir" >&2
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    exit 0
  fi
done
cat "$dir/log" >&2
exit 1
