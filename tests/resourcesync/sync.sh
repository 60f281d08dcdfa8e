#!/usr/bin/env bash
# ResourceSync end to end with the reference client: a gateway harvests a small upstream
# (upstream.py: OAI-PMH and the landing pages, on loopback) with two URLs a shard and a Change
# List, so that the Resource List and the Change Lists have indexes; `resync`'s Client makes a
# baseline sync from the Source Description, the upstream then updates, deletes and adds records,
# the gateway refreshes (incrementally), and an incremental sync from the Change Lists must leave
# the destination equal to the upstream's landing pages (client.py). Needs RESYNC_PYTHON, a Python
# with `resync` from PyPI.
#
#   RESYNC_PYTHON=python bash tests/resourcesync/sync.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/debug/oai-bridge}
python=${RESYNC_PYTHON:?a Python with resync}
fail() { echo "resourcesync: $*" >&2; exit 1; }
work=$(mktemp -d)
serve_pid= upstream_pid=
cleanup() {
  [ -z "$serve_pid" ] || kill "$serve_pid" 2>/dev/null || true
  [ -z "$upstream_pid" ] || kill "$upstream_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Ten records of 2024; the test rewrites the file to change the upstream.
python3 -c '
import json, sys
json.dump([{"id": i, "datestamp": f"2024-01-{i:02d}T00:00:00Z", "version": 1, "deleted": False}
           for i in range(1, 11)], open(sys.argv[1], "w"))' "$work/records.json"
port=$(free_port)
python3 tests/resourcesync/upstream.py "$port" "$work/records.json" >"$work/upstream.out" &
upstream_pid=$!
for _ in $(seq 100); do grep -q ready "$work/upstream.out" 2>/dev/null && break; sleep 0.1; done
upstream="http://127.0.0.1:$port/"

token=resourcesync-test-token-0123456789abcdef
cat >"$work/bridge.toml" <<TOML
[server]
state_dir = "$work/state"
[[repository]]
name = "up"
base_url = "${upstream}oai"
platform = "generic"
max_urls_per_shard = 2
changelist_days = 30
refresh_interval_secs = 86400
TOML
OAI_BRIDGE_ADMIN_TOKEN=$token OAI_BRIDGE_LEARN=off "$bin" serve --config "$work/bridge.toml" \
  --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 -q >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
for _ in $(seq 300); do grep -q "status page" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
base=$(sed -n 's/^oai-bridge serving on //p' "$work/serve.out")
admin=$(sed -n 's/^  status page  //p' "$work/serve.out")
[ -n "$base" ] && [ -n "$admin" ] || { cat "$work/serve.err"; fail "the gateway did not start"; }
for _ in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' "${base}readyz")" = 200 ] && break; sleep 0.1; done

dest="$work/destination"
cd "$work"
"$python" "$OLDPWD/tests/resourcesync/client.py" baseline "$base" up "$upstream" "$dest" "$work/records.json"
cd "$OLDPWD"

# Upstream: record 1 updated, record 2 deleted, record 11 added.
python3 -c '
import json, sys
from datetime import datetime, timezone
now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
records = json.load(open(sys.argv[1]))
records[0].update(datestamp=now, version=2)
records[1].update(datestamp=now, deleted=True)
records.append({"id": 11, "datestamp": now, "version": 1, "deleted": False})
json.dump(records, open(sys.argv[1], "w"))' "$work/records.json"
echo '{"created": [11], "updated": [1], "deleted": [2]}' >"$work/changes.json"
before=$(curl -sf -D - -o /dev/null "${base}up/capabilitylist.xml" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
sleep 1 # a new second: the next generation's time differs
curl -sf -X POST -H "Authorization: Bearer $token" "${admin}-/refresh/up" >/dev/null || fail "the refresh was not started"
for _ in $(seq 300); do
  now=$(curl -sf -D - -o /dev/null "${base}up/capabilitylist.xml" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
  [ "$now" != "$before" ] && break
  sleep 0.1
done
[ "$now" != "$before" ] || fail "no new generation after the refresh"
cd "$work"
"$python" "$OLDPWD/tests/resourcesync/client.py" incremental "$base" up "$upstream" "$dest" "$work/records.json" "$work/changes.json"
cd "$OLDPWD"

# Every document valid: the urlsets and the indexes against sitemaps.org's schemas with
# ResourceSync 1.1's terms (schemas/README.md).
validate() {
  curl -sf -o "$work/doc.xml" "$1" || fail "GET $1"
  case "$(grep -o '<sitemapindex\|<urlset' "$work/doc.xml" | head -1)" in
    "<sitemapindex") schema=schemas/resourcesync-index.xsd ;;
    *) schema=schemas/resourcesync-urlset.xsd ;;
  esac
  xmllint --noout --schema "$schema" "$work/doc.xml" 2>"$work/xmllint.err" || { cat "$work/xmllint.err"; fail "$1 is not valid"; }
}
locs() { grep -o '<loc>[^<]*</loc>' "$1" | sed -e 's/<[^>]*>//g' -e 's/&amp;/\&/g'; }
validate "${base}.well-known/resourcesync"
validate "${base}up/capabilitylist.xml"
checked=2
for top in resourcelist.xml changelist-index.xml; do
  validate "${base}up/$top"
  cp "$work/doc.xml" "$work/top.xml"
  checked=$((checked + 1))
  for doc in $(locs "$work/top.xml"); do validate "$doc"; checked=$((checked + 1)); done
done
echo "   resourcesync: $checked documents valid (xmllint, schemas/resourcesync-*.xsd)"
echo "   resourcesync: baseline and incremental sync with resync, destination = upstream"
