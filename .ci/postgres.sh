#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of the PostgreSQL store (OAI_BRIDGE_TEST_POSTGRES).
#
#   .ci/postgres.sh            starts one in a new temporary folder, on a free loopback port, and
#                              prints its URL (postgres://postgres@127.0.0.1:PORT/postgres); the
#                              folder is the URL's socket directory, printed on stderr
#   .ci/postgres.sh tls        the same with ssl = on, and only TLS connections accepted: a
#                              throwaway CA (DIR/certs/ca.crt) signs the server's certificate,
#                              valid for the name localhost only; DIR/certs also holds another
#                              CA (wrong-ca.crt) and a client certificate and key of that CA for
#                              the user certuser (client.crt, client.key), who is let in by
#                              certificate alone; it prints postgres://postgres@localhost:PORT
#   .ci/postgres.sh stop DIR   stops the one in DIR and removes DIR
#   .ci/postgres.sh down DIR   stops the one in DIR (fast shutdown: open sessions are cut) and
#                              keeps its data, as a database that goes away (tests/it/chaos.rs)
#   .ci/postgres.sh up DIR     starts it again on the same port, with the same data
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

# The options a server was started with, kept in DIR so that `up` starts it as it was.
options_of() { cat "$1/options"; }
case "${1:-}" in
  down)
    dir=${2:?usage: .ci/postgres.sh down DIR}
    as_server "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
    exit 0
    ;;
  up)
    dir=${2:?usage: .ci/postgres.sh up DIR}
    as_server "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -o "$(options_of "$dir")" \
      start >/dev/null || { tail -20 "$dir/log" >&2; exit 1; }
    exit 0
    ;;
esac

tls=false
if [ "${1:-}" = tls ]; then tls=true; fi

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd -r -M -d /nonexistent -s /usr/sbin/nologin postgres
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/oai-bridge-pg.XXXXXX")
chmod 755 "$dir"
if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
as_server "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 -N \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
host=127.0.0.1
ssl_options=""
if $tls; then
  # Certificates for the TLS tests (valid a day: a throwaway server's), made here rather than
  # kept in the repository, where they would expire.
  certs=$dir/certs
  mkdir -p "$certs"
  (
    cd "$certs"
    quiet() { "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; }
    for ca in ca wrong-ca; do
      quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
        -subj "/CN=oai-bridge test $ca" -keyout "$ca.key" -out "$ca.crt"
    done
    printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/CN=localhost" -keyout server.key -out server.csr
    quiet openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
      -extfile server.ext -out server.crt
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/CN=certuser" -keyout client.key -out client.csr
    quiet openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
      -extfile client.ext -out client.crt
    rm -f ./*.csr ./*.ext ./*.srl ca.key wrong-ca.key
  )
  chmod 644 "$certs"/*.crt "$certs/client.key"
  chmod 600 "$certs/server.key"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$certs/server.key"; fi
  # TLS only: certuser by its certificate, everyone else by trust; cleartext refused, so that
  # a test that connects at all connected over TLS.
  cat >"$dir/data/pg_hba.conf" <<'HBA'
local     all  all                trust
hostssl   all  certuser  127.0.0.1/32  cert
hostssl   all  certuser  ::1/128       cert
hostssl   all  all       127.0.0.1/32  trust
hostssl   all  all       ::1/128       trust
HBA
  host=localhost
  ssl_options="-c ssl=on -c ssl_cert_file=$certs/server.crt -c ssl_key_file=$certs/server.key -c ssl_ca_file=$certs/ca.crt"
fi
# A free port: asked of the kernel, then given to the server (a race no test run has lost yet;
# a start that fails on it is tried again on another).
for _ in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
  echo "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c synchronous_commit=off $ssl_options" >"$dir/options"
  if as_server "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -o "$(options_of "$dir")" \
    start >/dev/null 2>&1; then
    if $tls; then
      as_server "$bindir/psql" -q -h "$dir" -p "$port" -U postgres -d postgres \
        -c "CREATE ROLE certuser LOGIN; GRANT CREATE ON SCHEMA public TO certuser" >/dev/null
    fi
    echo "$dir" >&2
    echo "postgres://postgres@$host:$port/postgres"
    exit 0
  fi
done
cat "$dir/log" >&2
exit 1
