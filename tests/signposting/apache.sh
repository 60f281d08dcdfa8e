#!/usr/bin/env bash
# The Apache httpd recipe of docs/discovery.md, run with the real Apache from Debian's apache2:
# a gateway serving the bundled sample with the Signmap on, Apache (as the user running this,
# in the foreground, with a configuration of its own) in front of a landing-page server through
# mod_proxy, with mod_lua's fixups hook docs/signposting.lua asking the gateway's
# /{name}/signposting. Checks that a landing page gets the gateway's Link header through Apache
# (on GET and HEAD), that a page the gateway does not know gets none, that the answer is cached
# (not asked again for every request) and that with the gateway stopped the page is still served,
# without links. Needs apache2 (its mod_lua, mod_proxy_http) and lua-socket.
# With SIGNPOSTING_PYTHON (a Python with the PyPI `signposting` package), that client reads the
# page's header and linksets too (tests/signposting/client.py).
#
#   [SIGNPOSTING_PYTHON=python] bash tests/signposting/apache.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/debug/oai-bridge}
fail() { echo "signposting/apache: $*" >&2; exit 1; }
work=$(mktemp -d)
serve_pid= apache_pid= back_pid=
cleanup() {
  [ -z "$apache_pid" ] || kill "$apache_pid" 2>/dev/null || true
  [ -z "$back_pid" ] || kill "$back_pid" 2>/dev/null || true
  [ -z "$serve_pid" ] || kill "$serve_pid" 2>/dev/null || true
  [ -z "$apache_pid" ] || wait "$apache_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
. tests/signposting/gateway.sh

front=$(free_port) back=$(free_port)
# The repository: every path a landing page (GET and HEAD), counting nothing.
python3 - "$back" >"$work/back.log" 2>&1 <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Page(BaseHTTPRequestHandler):
    body = b"<html><body>a landing page</body></html>\n"

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()

    def do_GET(self):
        self.do_HEAD()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Page).serve_forever()
PY
back_pid=$!
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$back/" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$back/" || fail "the landing-page server did not start: $(cat "$work/back.log")"

# The hook as docs/discovery.md gives it, told this gateway and the sample's origin (the test's
# Host is 127.0.0.1, not the published one).
apache=$work/apache
mkdir -p "$apache"
sed -e "s|^local GATEWAY = .*|local GATEWAY = \"http://$gateway/sample/signposting\"|" \
  -e "s|^local ORIGIN = .*|local ORIGIN = \"$origin\"|" docs/signposting.lua >"$apache/signposting.lua"
for want in "local GATEWAY = \"http://$gateway/" "local ORIGIN = \"$origin\""; do
  grep -qF "$want" "$apache/signposting.lua" || fail "docs/signposting.lua has no line for: $want"
done
# As root, Apache's children need a user of their own (it refuses to run them as root).
user_lines=
if [ "$(id -u)" = 0 ]; then
  user_lines=$'User www-data\nGroup www-data'
  chmod 755 "$work" "$apache"
fi
modules=/usr/lib/apache2/modules
cat >"$apache/apache2.conf" <<CONF
ServerRoot $apache
ServerName 127.0.0.1
DefaultRuntimeDir $apache
PidFile $apache/apache2.pid
ErrorLog $apache/error.log
LogLevel warn
Listen 127.0.0.1:$front
$user_lines
LoadModule mpm_event_module $modules/mod_mpm_event.so
LoadModule authz_core_module $modules/mod_authz_core.so
LoadModule proxy_module $modules/mod_proxy.so
LoadModule proxy_http_module $modules/mod_proxy_http.so
LoadModule lua_module $modules/mod_lua.so
StartServers 1
ServerLimit 1
ThreadsPerChild 4
MaxRequestWorkers 4
<VirtualHost 127.0.0.1:$front>
  # The repository, as before.
  ProxyPass / http://127.0.0.1:$back/
  # The recipe of docs/discovery.md.
  LuaScope thread
  LuaHookFixups $apache/signposting.lua signposting
</VirtualHost>
CONF
apache2 -t -f "$apache/apache2.conf" 2>"$work/apache-t.err" || { cat "$work/apache-t.err"; fail "Apache refuses the recipe"; }
apache2 -f "$apache/apache2.conf" -DFOREGROUND &
apache_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$front/" && break; sleep 0.1; done

# The gateway's count of Link headers asked for (its /metrics), to see what Apache's cache spares.
metrics=$(sed -n 's/^  metrics      //p' "$work/serve.out")
asked() {
  curl -s "$metrics" | awk '/^oai_bridge_signposting_answers_total\{/ && /answer="header"/ { s += $2 } END { print s + 0 }'
}
# $1 (GET, or -I for HEAD) $2 through Apache: the status, then the Link header (empty when none).
through() {
  local method=()
  [ "$1" = GET ] || method=(-I)
  curl -s "${method[@]}" -D "$work/headers" -o "$work/body" "http://127.0.0.1:$front$2" -w '%{http_code}\n'
  grep -i '^link:' "$work/headers" | sed 's/^[Ll]ink: //' | tr -d '\r' || true
}
before=$(asked)
for method in GET HEAD GET; do
  reply=$(through "$method" "$path")
  status=$(head -1 <<<"$reply") link=$(sed -n 2p <<<"$reply")
  [ "$status" = 200 ] || fail "$method $path through Apache: $status ($(tail -3 "$apache/error.log"))"
  [ "$method" = HEAD ] || grep -q 'a landing page' "$work/body" || fail "$path: not the landing page's body"
  [ "$link" = "$direct" ] || fail "$method: Apache added another Link than the gateway's:
  Apache:  $link
  gateway: $direct
  $(tail -3 "$apache/error.log")"
done
for rel in describedby linkset; do
  grep -q "rel=\"$rel\"" <<<"$link" || fail "no $rel in $link"
done
# One Apache child of 4 threads, a cache per thread: 3 requests asked at most 3 times, and a 4th
# series of requests cannot all miss.
for _ in 1 2 3 4 5 6 7 8; do through GET "$path" >/dev/null; done
after=$(asked)
(( after - before >= 1 && after - before <= 4 )) ||
  fail "11 requests for $path made the gateway answer $((after - before)) Link headers (cached per thread: 1 to 4)"
echo "   $path through Apache: 200 with the gateway's Link on GET and HEAD ($(grep -o 'rel="[a-z-]*"' <<<"$link" | sort -u | tr '\n' ' ')), the gateway asked $((after - before)) times for 11 requests"
if [ -n "${SIGNPOSTING_PYTHON:-}" ]; then
  "$SIGNPOSTING_PYTHON" tests/signposting/client.py "http://127.0.0.1:$front$path" "$landing"
fi

reply=$(through GET /not/a/landing/page)
[ "$(head -1 <<<"$reply")" = 200 ] || fail "an unknown page through Apache: $(head -1 <<<"$reply")"
[ -z "$(sed -n 2p <<<"$reply")" ] || fail "an unknown page got links: $(sed -n 2p <<<"$reply")"
echo "   an unknown page through Apache: 200 without Link"

kill -TERM "$serve_pid"
wait "$serve_pid" || true
serve_pid=
reply=$(through GET /another/page)
[ "$(head -1 <<<"$reply")" = 200 ] || fail "with the gateway down, a page through Apache: $(head -1 <<<"$reply")"
[ -z "$(sed -n 2p <<<"$reply")" ] || fail "with the gateway down, links: $(sed -n 2p <<<"$reply")"
echo "   the gateway down: pages still 200, without Link"
