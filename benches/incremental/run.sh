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
# Every export but the whole render after the profiles' refresh is run RUNS times, each full harvest followed by the
# refresh after the change, and the report takes each one's median and judges the ratios by the
# median of the pairs' own: on this kind of machine one run's CPU time moves by 15-30% from one
# minute to the next, and the two runs of a pair see the machine alike.
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
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "RUNS must be a positive number, not '$RUNS'" >&2; exit 1; }
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

# drop_cached DIR: drops DIR's files from the page cache, where an export leaves none of what it
# wrote (with direct I/O); `sync` first, as the kernel drops only clean pages.
drop_cached() {
  sync
  find "$1" -type f -print0 | xargs -0 -r python3 benches/incremental/floor.py drop \
    "$work/drop.tmp" >/dev/null
}

# alternated FULL REFRESH OUT STATE ARGS...: RUNS pairs of a full harvest from nothing of the
# repository as it was (the server started with `before`'s arguments), `timed FULL-K`, then the
# refresh after the change from that harvest (`after`'s arguments), `timed REFRESH-K`. Full
# harvest and refresh alternate, so that each pair sees the machine alike: on a shared machine
# one run's CPU time moves by 15-30% from one minute to the next. The hooks `after_full NAME`
# and `after_refresh NAME` check or measure a run's output before the next run replaces it. The
# server is left running with the changed repository.
alternated() {
  local full=$1 refresh=$2 out=$3 state=$4 run
  shift 4
  for run in $(seq 1 "$RUNS"); do
    [ "$run" = 1 ] || stop_server
    rm -rf "$out" "$state"
    start_server "${before[@]}"
    timed "$full-$run" --out "$out" --state "$state" "$@"
    stop_server
    after_full "$full-$run"
    start_server "${after[@]}"
    drop_cached "$out"
    timed "$refresh-$run" --out "$out" --state "$state" "$@"
    after_refresh "$refresh-$run"
  done
}
after_full() { :; }

log "a plain export of $RECORDS records (the reference), $RUNS times"
start_server
for run in $(seq 1 "$RUNS"); do
  rm -rf "$work/plain-out"
  timed "plain-$run" --out "$work/plain-out"
done
rm -rf "$work/plain-out"
stop_server

log "$RUNS times: a full harvest through the store, then the refresh after every ${CHANGED_EVERY}th record changed (half of them deleted)"
before=()
after=(--changed-every "$CHANGED_EVERY" --response-date 2025-10-01T00:00:00Z
  --expected-urls "$work/expected.urls")
after_refresh() { python3 benches/harvest/sitemap_urls.py "$work/out" "$work/$1.urls" >/dev/null; }
alternated full incremental "$work/out" "$work/state"

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
  log "profiles, $RUNS times: a full harvest with every patchable profile, then the refresh after the change"
  profiles=(--signmap --ocx --cdif-list --scope "https://127.0.0.1:$PORT/oai/")
  for i in 0 1 2 3 4; do profiles+=(--diwoo "com_$i=$((i + 1))"); done
  # sha256 of every file of the profiles' export, by name.
  sums() { (cd "$work/out-p" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$1"; }
  # The floor under a patch that rewrites every file (floor.py), after the first full harvest:
  # the profiles' published files (all but the sitemap's, robots.txt and the hidden ledger) read
  # and written again, nothing else. The export wrote them past the page cache, and the patch
  # finds them so (`alternated` drops them again after the kernel copy read them through it).
  after_full() {
    [ "$1" = profiles-full-1 ] || return 0
    mapfile -t profile_files < <(find "$work/out-p" -type f ! -name '.*' ! -name robots.txt \
      -regextype posix-extended ! -regex '.*/sitemap(-[0-9]+)?\.xml(\.gz)?' | sort)
    for mode in user kernel; do
      /usr/bin/time -v -o "$work/floor-$mode.time" python3 benches/incremental/floor.py "$mode" \
        "$work/floor.out" "${profile_files[@]}" >"$work/floor-$mode.bytes"
      rm -f "$work/floor.out"
    done
    echo "${#profile_files[@]}" >"$work/floor.files"
  }
  after_refresh() { sums "$work/$1.sums"; }
  before=(--https-identifiers)
  after=(--https-identifiers --changed-every "$CHANGED_EVERY" --response-date 2025-10-01T00:00:00Z)
  alternated profiles-full profiles-incremental "$work/out-p" "$work/state-p" "${profiles[@]}"
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
