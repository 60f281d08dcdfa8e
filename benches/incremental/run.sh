#!/usr/bin/env bash
# Incremental benchmark (issue 5, point 11): a 1,000,000-record repository is harvested in full
# through the store (`export --state`), then the repository changes 1% of its records (updates, a
# half of them deletions) and the next export asks only for the changes. Reports CPU-seconds
# (GNU time), upstream requests (counted by the server) and peak RSS of both, with the ratios, and
# checks the incremental result against the changed repository's own URL list. A plain export
# (no store) of the same repository is measured in the same run as the reference.
# Then the gateway: `serve` harvests the same repository through its store (peak RSS of the
# process, point 2), is stopped, and started again: the time until the persisted generation is
# served (index and a shard answer 200) is measured.
# Then the same with every profile a refresh patches on (issue 30, point 5: Signmap, OCX, CDIF
# lists, five DiWoo categories; https identifiers, as DiWoo publishes only those): a full
# harvest through the store, the incremental refresh after the same change, and the same
# refresh once more with the profiles' ledger removed, which renders every stored record as a
# refresh did before the profiles were patched; its files must be byte for byte the patch's.
# Between the full harvest and the refresh, the floor under a patch that must rewrite every file
# (floor.py): the profiles' published bytes read and written again, and copied in the kernel.
#
# Every export but the reference render is run RUNS times (each refresh from a copy of the same
# full harvest's output and state) and the report takes each one's median: on this kind of
# machine one full harvest's CPU time scatters by 15% from run to run, mostly system time.
#
#   bash benches/incremental/run.sh        # about 20 minutes; writes benches/incremental/RESULTS.md
#
# Knobs: RECORDS (1000000), PAGE_SIZE (500), CHANGED_EVERY (100: 1%), RUNS (3), PORT (18777),
# GATEWAY_PORT (18778), PROFILES (1; 0 leaves the profiles out). Loopback only; everything it
# writes stays under target/bench-incremental/.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-1000000}
PAGE_SIZE=${PAGE_SIZE:-500}
CHANGED_EVERY=${CHANGED_EVERY:-100}
RUNS=${RUNS:-3}
PORT=${PORT:-18777}
GATEWAY_PORT=${GATEWAY_PORT:-18778}
PROFILES=${PROFILES:-1}
# The gateway's admin listener on a free port, not its default 127.0.0.1:8081 (see lib.sh).
export OAI_BRIDGE_ADMIN_LISTEN=${OAI_BRIDGE_ADMIN_LISTEN:-127.0.0.1:0}
work=target/bench-incremental
server_bin=target/bench-server/release/oai-bench-server
bin=target/release/oai-bridge
base_url="http://127.0.0.1:$PORT/oai/request"
public_url="http://127.0.0.1:$PORT/oai/"

log() { printf '== %s\n' "$*" >&2; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

if [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq time >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq time >/dev/null; fi
fi
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }
log "building oai-bridge and the benchmark server (release)"
timeout 1800 cargo build --release --locked --bin oai-bridge
timeout 900 cargo build --release --locked --manifest-path benches/harvest/server/Cargo.toml \
  --target-dir target/bench-server
rm -rf "$work"
mkdir -p "$work"

server_pid=
start_server() { # ARGS...: starts the server, waits until it listens
  "$server_bin" --records "$RECORDS" --page-size "$PAGE_SIZE" --port "$PORT" "$@" \
    2>>"$work/server.log" &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 3000); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "the server did not listen" >&2
  exit 1
}
stop_server() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
requests() { curl -s "http://127.0.0.1:$PORT/count"; }

# timed NAME ARGS...: an export under GNU time; the server's request count before and after.
timed() {
  local name=$1
  shift
  local before
  before=$(requests)
  timeout 1800 /usr/bin/time -v -o "$work/$name.time" "$bin" export --base-url "$base_url" \
    --public-url "$public_url" --no-progress "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" \
    || { echo "$name failed:" >&2; tail -20 "$work/$name.stderr" >&2; exit 1; }
  echo $(($(requests) - before - 0)) >"$work/$name.requests"
}

# repeated NAME OUT [STATE] -- ARGS...: `timed NAME-K ARGS...` for K = 1..RUNS, each from what
# the folders held before the first (copied aside and back). The output's files are then dropped
# from the page cache, where an export leaves none (it writes them with direct I/O); the state is
# left cached, as the export that wrote it leaves it.
repeated() {
  local name=$1 dirs=() run d
  shift
  while [ "$1" != -- ]; do dirs+=("$1"); shift; done
  shift
  for d in "${dirs[@]}"; do
    rm -rf "$d.before"
    [ "$RUNS" = 1 ] || [ ! -e "$d" ] || cp -a "$d" "$d.before"
  done
  for run in $(seq 1 "$RUNS"); do
    if [ "$run" -gt 1 ]; then
      for d in "${dirs[@]}"; do
        rm -rf "$d"
        [ ! -e "$d.before" ] || cp -a "$d.before" "$d"
      done
    fi
    sync # the copy's pages are dirty, and the kernel drops only clean ones
    [ ! -d "${dirs[0]}" ] || find "${dirs[0]}" -type f -print0 \
      | xargs -0 -r python3 benches/incremental/floor.py drop "$work/drop.tmp" >/dev/null
    timed "$name-$run" "$@"
    after_run "$name-$run"
  done
  for d in "${dirs[@]}"; do rm -rf "$d.before"; done
}
after_run() { :; } # NAME: what a run's output is checked for, before the next run replaces it

log "state 1: $RECORDS records"
start_server
repeated plain "$work/plain-out" -- --out "$work/plain-out"
rm -rf "$work/plain-out"
repeated full "$work/out" "$work/state" -- --out "$work/out" --state "$work/state"
stop_server

log "state 2: every ${CHANGED_EVERY}th record changed (half of them deleted)"
start_server --changed-every "$CHANGED_EVERY" --response-date 2025-10-01T00:00:00Z \
  --expected-urls "$work/expected.urls"
after_run() { python3 benches/harvest/sitemap_urls.py "$work/out" "$work/$1.urls" >/dev/null; }
repeated incremental "$work/out" "$work/state" -- --out "$work/out" --state "$work/state"
after_run() { :; }

log "the gateway: a full refresh through its store, then a restart"
cat >"$work/bridge.toml" <<EOF
[server]
listen = "127.0.0.1:$GATEWAY_PORT"
state_dir = "$work/gateway"
[[repository]]
name = "r"
base_url = "$base_url"
refresh_interval_secs = 86400
EOF
gateway="http://127.0.0.1:$GATEWAY_PORT"
start_gateway() {
  "$bin" serve --config "$work/bridge.toml" -q >>"$work/gateway.log" 2>&1 &
  gateway_pid=$!
  pids+=("$gateway_pid")
}
start_gateway
for _ in $(seq 1 6000); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$gateway/readyz")" = 200 ] && break
  sleep 0.1
done
grep VmHWM "/proc/$gateway_pid/status" | awk '{print $2}' >"$work/gateway.hwm"
kill -TERM "$gateway_pid"
wait "$gateway_pid" 2>/dev/null || true
stop_server # the restarted gateway must not need the upstream to serve
start=$(date +%s.%N)
start_gateway
for _ in $(seq 1 3000); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$gateway/r/sitemap.xml")" = 200 ] && break
  sleep 0.01
done
index_at=$(date +%s.%N)
shard=$(curl -s -o /dev/null -w '%{http_code}' "$gateway/r/sitemap-1.xml")
echo "$start $index_at $shard" >"$work/restart"
kill -TERM "$gateway_pid"
wait "$gateway_pid" 2>/dev/null || true

if [ "$PROFILES" = 1 ]; then
  log "profiles: a full harvest with every patchable profile, then the refresh after the change"
  profiles=(--signmap --ocx --cdif-list --scope "https://127.0.0.1:$PORT/oai/")
  for i in 0 1 2 3 4; do profiles+=(--diwoo "com_$i=$((i + 1))"); done
  # sha256 of every file of the profiles' export, by name.
  sums() { (cd "$work/out-p" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$1"; }
  start_server --https-identifiers
  repeated profiles-full "$work/out-p" "$work/state-p" -- \
    --out "$work/out-p" --state "$work/state-p" "${profiles[@]}"
  stop_server
  # The floor under a patch that rewrites every file (floor.py): the profiles' published files
  # (all but the sitemap's, robots.txt and the hidden ledger) read and written again, nothing
  # else. The export wrote them past the page cache, and the patch finds them so: the kernel
  # copy reads them through it, so their pages are dropped again afterwards (not timed).
  mapfile -t profile_files < <(find "$work/out-p" -type f ! -name '.*' ! -name robots.txt \
    -regextype posix-extended ! -regex '.*/sitemap(-[0-9]+)?\.xml(\.gz)?' | sort)
  for mode in user kernel; do
    /usr/bin/time -v -o "$work/floor-$mode.time" python3 benches/incremental/floor.py "$mode" \
      "$work/floor.out" "${profile_files[@]}" >"$work/floor-$mode.bytes"
    rm -f "$work/floor.out"
  done
  python3 benches/incremental/floor.py drop "$work/floor.out" "${profile_files[@]}" >/dev/null
  echo "${#profile_files[@]}" >"$work/floor.files"
  start_server --https-identifiers --changed-every "$CHANGED_EVERY" \
    --response-date 2025-10-01T00:00:00Z
  after_run() { sums "$work/$1.sums"; }
  repeated profiles-incremental "$work/out-p" "$work/state-p" -- \
    --out "$work/out-p" --state "$work/state-p" "${profiles[@]}"
  after_run() { :; }
  # Without the ledger the refresh renders every stored record: the reference bytes, and the
  # cost of a refresh before the profiles were patched.
  rm "$work/out-p/.oai-bridge-ledger"
  timed profiles-whole --out "$work/out-p" --state "$work/state-p" "${profiles[@]}"
  sums "$work/profiles-whole.sums"
  stop_server
  rm -rf "$work/out-p" "$work/state-p"
fi

# changelists.sh's section stays at the end.
kept=$(sed -n '/^## What the Change Lists cost/,$p' benches/incremental/RESULTS.md 2>/dev/null || true)
{
  python3 benches/incremental/report.py "$work" "$RECORDS" "$CHANGED_EVERY"
  [ -z "$kept" ] || printf '\n%s\n' "$kept"
} | tee benches/incremental/RESULTS.md.new
mv benches/incremental/RESULTS.md.new benches/incremental/RESULTS.md
