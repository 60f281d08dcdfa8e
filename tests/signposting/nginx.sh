#!/usr/bin/env bash
# The Level 1 recipe of docs/discovery.md, run with the real nginx: a gateway serving the bundled
# sample with the Signmap on, nginx in front of a landing-page server with `auth_request` to the
# gateway's /{name}/signposting. Checks that a landing page gets the gateway's Link header through
# nginx, that a page the gateway does not know gets none, and that with the gateway stopped the
# page is still served, without links. Needs nginx (with the auth_request module, as Debian's).
# With SIGNPOSTING_PYTHON (a Python with the PyPI `signposting` package), that client reads the
# page's header and linksets too (tests/signposting/client.py).
#
#   [SIGNPOSTING_PYTHON=python] bash tests/signposting/nginx.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/debug/oai-bridge}
fail() { echo "signposting/nginx: $*" >&2; exit 1; }
work=$(mktemp -d)
serve_pid= nginx_pid=
cleanup() {
  [ -z "$nginx_pid" ] || kill "$nginx_pid" 2>/dev/null || true
  [ -z "$serve_pid" ] || kill "$serve_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
. tests/signposting/gateway.sh

front=$(free_port) back=$(free_port)
mkdir -p "$work/nginx/logs" "$work/nginx/cache"
user_line=
[ "$(id -u)" != 0 ] || user_line="user root;"
cat >"$work/nginx/nginx.conf" <<CONF
$user_line
daemon off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $work/nginx/cache/body;
  proxy_temp_path $work/nginx/cache/proxy;
  fastcgi_temp_path $work/nginx/cache/fastcgi;
  uwsgi_temp_path $work/nginx/cache/uwsgi;
  scgi_temp_path $work/nginx/cache/scgi;
  proxy_cache_path $work/nginx/cache/signposting keys_zone=signposting:1m max_size=10m;
  # The repository: every path a landing page.
  server {
    listen 127.0.0.1:$back;
    location / { default_type text/html; return 200 "<html><body>a landing page</body></html>\n"; }
  }
  # The recipe of docs/discovery.md.
  server {
    listen 127.0.0.1:$front;
    location / {
      auth_request /_signposting;
      auth_request_set \$signposting_link \$upstream_http_link;
      add_header Link \$signposting_link always;
      proxy_pass http://127.0.0.1:$back;
    }
    location = /_signposting {
      internal;
      proxy_pass http://$gateway/sample/signposting;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Signposting-Url $origin\$request_uri;
      proxy_connect_timeout 1s;
      proxy_read_timeout 2s;
      proxy_cache signposting;
      proxy_cache_key $origin\$request_uri;
      proxy_cache_valid 204 10m;
      proxy_intercept_errors on;
      error_page 500 502 503 504 = @no_signposting;
    }
    location @no_signposting { return 204; }
  }
}
CONF
nginx -t -p "$work/nginx" -c "$work/nginx/nginx.conf" 2>"$work/nginx-t.err" || { cat "$work/nginx-t.err"; fail "nginx refuses the recipe"; }
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$front/" && break; sleep 0.1; done

# GET $1 through nginx: the status, then the Link header (empty when none).
through() {
  curl -s -D "$work/headers" -o "$work/body" "http://127.0.0.1:$front$1" -w '%{http_code}\n'
  grep -i '^link:' "$work/headers" | sed 's/^[Ll]ink: //' | tr -d '\r' || true
}
reply=$(through "$path")
status=$(head -1 <<<"$reply") link=$(sed -n 2p <<<"$reply")
[ "$status" = 200 ] || fail "$path through nginx: $status"
grep -q 'a landing page' "$work/body" || fail "$path: not the landing page's body"
[ "$link" = "$direct" ] || fail "nginx added another Link than the gateway's:
  nginx:   $link
  gateway: $direct"
for rel in describedby linkset; do
  grep -q "rel=\"$rel\"" <<<"$link" || fail "no $rel in $link"
done
echo "   $path through nginx: 200 with the gateway's Link ($(grep -o 'rel="[a-z-]*"' <<<"$link" | sort -u | tr '\n' ' '))"
if [ -n "${SIGNPOSTING_PYTHON:-}" ]; then
  "$SIGNPOSTING_PYTHON" tests/signposting/client.py "http://127.0.0.1:$front$path" "$landing"
fi

reply=$(through /not/a/landing/page)
[ "$(head -1 <<<"$reply")" = 200 ] || fail "an unknown page through nginx: $(head -1 <<<"$reply")"
[ -z "$(sed -n 2p <<<"$reply")" ] || fail "an unknown page got links: $(sed -n 2p <<<"$reply")"
echo "   an unknown page through nginx: 200 without Link"

kill -TERM "$serve_pid"
wait "$serve_pid" || true
serve_pid=
reply=$(through /another/page)
[ "$(head -1 <<<"$reply")" = 200 ] || fail "with the gateway down, a page through nginx: $(head -1 <<<"$reply")"
[ -z "$(sed -n 2p <<<"$reply")" ] || fail "with the gateway down, links: $(sed -n 2p <<<"$reply")"
echo "   the gateway down: pages still 200, without Link"
