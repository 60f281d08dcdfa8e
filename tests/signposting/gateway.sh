# Sourced by the Signposting recipes' tests (nginx.sh, apache.sh), after `fail`, `work` (a
# temporary folder) and `bin` (the oai-bridge binary) are set: starts a gateway serving the bundled
# sample with the Signmap on (its pid in serve_pid, its URL in base, its host:port in gateway),
# and finds a landing page of its Signmap (landing), that page's origin and path (what the proxy
# in front of the repository tells the gateway: origin and path), and the gateway's own Link
# header for it (direct).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

sed -e 's|^base_url = "fixtures/|base_url = "'"$PWD"'/fixtures/|' -e 's/^signmap = false/signmap = true/' \
  bridge.toml >"$work/bridge.toml"
grep -q '^signmap = true' "$work/bridge.toml" || fail "bridge.toml has no signmap line"
"$bin" serve --config "$work/bridge.toml" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --state-dir "$work/state" -q >"$work/serve.out" &
serve_pid=$!
for _ in $(seq 300); do grep -q "serving on" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
base=$(sed -n 's/^oai-bridge serving on //p' "$work/serve.out")
[ -n "$base" ] || fail "the gateway did not start"
for _ in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' "${base}readyz")" = 200 ] && break; sleep 0.1; done
gateway=${base#http://}
gateway=${gateway%/}

# A landing page of the Signmap, and its origin (the URL the proxy tells the gateway).
# (Read from files: a pipe that ends early would fail curl under pipefail.)
first_loc() { grep -o '<loc>[^<]*</loc>' "$1" | sed -e 's/<[^>]*>//g' -e 's/&amp;/\&/g' | sed -n 1p; }
curl -sf -o "$work/signmap.xml" "${base}sample/signmap.xml"
shard=$(first_loc "$work/signmap.xml")
curl -sf -o "$work/shard.xml" "${base}sample/${shard##*/}"
landing=$(first_loc "$work/shard.xml")
[ -n "$landing" ] || fail "no landing page in the Signmap"
origin=$(sed -E 's|^(https?://[^/]+).*|\1|' <<<"$landing")
path=${landing#"$origin"}
direct=$(curl -s -D - -o /dev/null -H "X-Signposting-Url: $landing" "${base}sample/signposting" |
  grep -i '^link:' | sed 's/^[Ll]ink: //' | tr -d '\r')
[ -n "$direct" ] || fail "the gateway has no Link for $landing"
