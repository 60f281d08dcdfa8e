#!/usr/bin/env bash
# What ResourceSync's Change Lists cost an incremental refresh (issue 32, point 6: at most 5% of
# an incremental refresh of 1% of a million records). One gateway (`serve`) with two
# repositories harvesting the same benchmark upstream: `on` with the default `changelist_days`
# (Change Lists written) and `off` with `changelist_days = 0`. After both first (full) refreshes
# the gateway is stopped and its state folder kept; the upstream then changes 1% of its records
# (half of them deleted). Each round restores the kept state, starts the gateway, triggers one
# repository's refresh through `POST /-/refresh/{name}`, and counts the CPU-seconds (utime +
# stime, /proc/PID/stat) the gateway spent from the trigger until the refresh ended: start-up is
# not counted. The repositories alternate, and so does which one a round measures first.
# The `on` repository's Change Lists are then checked against its sitemap before and after: one
# entry per landing page created, updated or deleted, of that kind.
# With FALLBACK=1, the same for a refresh that harvests in full (the upstream says
# deletedRecord=transient and `full_harvest_interval_secs` has passed), whose changes come from
# comparing the sitemaps instead of from the patch.
#
#   bash benches/incremental/changelists.sh   # about 10 minutes; prints a Markdown section
#
# Writes the section at the end of benches/incremental/RESULTS.md when run with the default
# RECORDS and CHANGED_EVERY.
# With PERF=1, one more refresh of `on` (not counted) under perf: the share of its CPU in the
# Change Lists and in the comparison of the sitemaps.
# Knobs: RECORDS (1000000), PAGE_SIZE (500), CHANGED_EVERY (100: 1%), ROUNDS (5), FALLBACK (0),
# FALLBACK_ROUNDS (ROUNDS), PERF (0), PORT (18787), GATEWAY_PORT (18788), ADMIN_PORT (18789),
# BIN (an oai-bridge binary to measure; without it the working tree is built in release), REV
# (the commit BIN was built from, for the report). Loopback only; everything it writes stays
# under target/bench-changelists/.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-1000000}
PAGE_SIZE=${PAGE_SIZE:-500}
CHANGED_EVERY=${CHANGED_EVERY:-100}
ROUNDS=${ROUNDS:-5}
FALLBACK=${FALLBACK:-0}
PERF=${PERF:-0}
FALLBACK_ROUNDS=${FALLBACK_ROUNDS:-$ROUNDS}
PORT=${PORT:-18787}
GATEWAY_PORT=${GATEWAY_PORT:-18788}
ADMIN_PORT=${ADMIN_PORT:-18789}
work=target/bench-changelists
bin=$work/oai-bridge
# lib.sh's default (a free port) would leave the admin endpoints unreachable from here.
export OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$ADMIN_PORT
export OAI_BRIDGE_ADMIN_TOKEN=bench-changelists-0123456789
# shellcheck source=benches/lib.sh
source benches/lib.sh
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }
if [ "${PERF:-0}" = 1 ]; then install_missing perf:linux-perf; fi

rm -rf "$work"
mkdir -p "$work"
if [ -n "${BIN:-}" ]; then
  cp "$BIN" "$bin"
  build_server
else
  build_binaries
fi
hz=$(getconf CLK_TCK)
gateway="http://127.0.0.1:$GATEWAY_PORT"
admin="http://127.0.0.1:$ADMIN_PORT"

# start_server ARGS...: the upstream of RECORDS records (benches/lib.sh's start_upstream).
start_server() { start_upstream "$PORT" --records "$RECORDS" --page-size "$PAGE_SIZE" "$@"; }
stop_server() { stop_upstream; }

# write_config EXTRA: the gateway's configuration (its state_dir absolute: a relative one is the
# configuration file's); EXTRA goes into both repositories.
write_config() {
  local repo
  {
    printf '[server]\nlisten = "127.0.0.1:%s"\nstate_dir = "%s/state"\n' "$GATEWAY_PORT" "$PWD/$work"
    for repo in on off; do
      printf '\n[[repository]]\nname = "%s"\n' "$repo"
      printf 'base_url = "http://127.0.0.1:%s/oai/request"\n' "$PORT"
      printf 'refresh_interval_secs = 86400\n%s\n' "$1"
      [ "$repo" = off ] && printf 'changelist_days = 0\n'
    done
  } >"$work/bridge.toml"
}

gateway_pid=
start_gateway() {
  "$bin" serve --config "$work/bridge.toml" -q >>"$work/gateway.log" 2>&1 &
  gateway_pid=$!
  pids+=("$gateway_pid")
}
stop_gateway() {
  kill -TERM "$gateway_pid" 2>/dev/null || true
  wait "$gateway_pid" 2>/dev/null || true
}
# succeeded NAME: how many refreshes of NAME succeeded since the gateway started.
succeeded() {
  curl -s "$admin/metrics" | awk -v r="repository=\"$1\"" \
    '/^oai_bridge_harvests_total\{/ && index($0, r) && /outcome="success"/ {n += $NF} END {print n + 0}'
}
# wait_succeeded NAME N: until N refreshes of NAME succeeded (a failure ends the run).
wait_succeeded() {
  for _ in $(seq 1 36000); do
    [ "$(succeeded "$1")" -ge "$2" ] && return 0
    kill -0 "$gateway_pid" 2>/dev/null || { tail -20 "$work/gateway.log" >&2; exit 1; }
    if curl -s "$admin/metrics" | grep -q "^oai_bridge_harvests_total{.*repository=\"$1\".*outcome=\"failure\""; then
      echo "the refresh of $1 failed:" >&2
      tail -20 "$work/gateway.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "the refresh of $1 did not end" >&2
  exit 1
}
# cpu: the gateway's utime + stime so far, in clock ticks (fields 14 and 15 of its stat, counted
# after the parenthesised command name, which may hold spaces).
cpu() { sed 's/^.*) //' "/proc/$gateway_pid/stat" | awk '{print $12 + $13}'; }
wait_ready() {
  for _ in $(seq 1 6000); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$gateway/readyz")" = 200 ] && return 0
    sleep 0.1
  done
  echo "the gateway did not become ready" >&2
  exit 1
}
# settle: until the gateway spends no CPU for a second (loading the generations at start).
settle() {
  local a b
  for _ in $(seq 1 60); do
    a=$(cpu)
    sleep 1
    b=$(cpu)
    [ "$a" = "$b" ] && return 0
  done
}

# sitemap DIR: the `on` repository's sitemap as served (its index and every shard), into DIR.
sitemap() {
  local shard
  mkdir -p "$1"
  curl -sf "$gateway/on/sitemap.xml" >"$1/index.xml"
  for shard in $(grep -o 'sitemap-[0-9]*\.xml' "$1/index.xml" | sort -u); do
    curl -sf "$gateway/on/$shard" >"$1/$shard"
  done
}
# changelists DIR: the `on` repository's Change Lists (the index, when there is one), into DIR.
changelists() {
  local list lists
  mkdir -p "$1"
  if [ "$(curl -s -o "$1/index.xml" -w '%{http_code}' "$gateway/on/changelist-index.xml")" = 200 ]; then
    lists=$(grep -o 'changelist-[0-9]*\.xml' "$1/index.xml" | sort -u)
  else
    rm "$1/index.xml"
    lists=changelist-1.xml
  fi
  for list in $lists; do curl -sf "$gateway/on/$list" >"$1/$list"; done
}

# measure LABEL ROUNDS: the refreshes from the kept state, each repository once a round; the
# CPU ticks of each into $work/LABEL-NAME.cpu, one a line.
measure() {
  local label=$1 round first second name before after requests
  for round in $(seq 1 "$2"); do
    if ((round % 2)); then first=on second=off; else first=off second=on; fi
    for name in $first $second; do
      rm -rf "$work/state"
      cp -a "$work/kept" "$work/state"
      start_gateway
      wait_ready
      settle
      requests=$(curl -s "http://127.0.0.1:$PORT/count")
      before=$(cpu)
      curl -sf -X POST -H "Authorization: Bearer $OAI_BRIDGE_ADMIN_TOKEN" \
        "$admin/-/refresh/$name" >/dev/null
      wait_succeeded "$name" 1
      after=$(cpu)
      echo $((after - before)) >>"$work/$label-$name.cpu"
      echo $(($(curl -s "http://127.0.0.1:$PORT/count") - requests)) >>"$work/$label-$name.requests"
      log "$label round $round, $name: $(((after - before) * 1000 / hz)) ms CPU"
      if [ "$name" = on ] && ((round == 1)); then
        sitemap "$work/$label-after"
        changelists "$work/$label-changelists"
      fi
      stop_gateway
    done
  done
  if [ "$PERF" = 1 ]; then profile "$label"; fi
}

# profile LABEL: one more refresh of `on`, not counted, under perf (call graphs by DWARF: the
# release binary keeps no frame pointers); the share of its samples in what the Change Lists
# and the comparison of the sitemaps cost, into $work/LABEL.perf.txt.
profile() {
  local perf_pid
  rm -rf "$work/state"
  cp -a "$work/kept" "$work/state"
  start_gateway
  wait_ready
  settle
  # A full harvest runs ten times as long: fewer samples keep its report to minutes.
  local freq=999
  [ "$1" = fallback ] && freq=199
  perf record -q -F "$freq" --call-graph dwarf,32768 -p "$gateway_pid" -o "$work/$1.perf" \
    2>>"$work/perf.log" &
  perf_pid=$!
  sleep 1
  curl -sf -X POST -H "Authorization: Bearer $OAI_BRIDGE_ADMIN_TOKEN" "$admin/-/refresh/on" \
    >/dev/null
  wait_succeeded on 1
  kill -INT "$perf_pid"
  wait "$perf_pid" 2>/dev/null || true
  stop_gateway
  perf report -i "$work/$1.perf" --children --sort symbol --stdio -g none 2>/dev/null \
    | grep -E 'write_changelists|NextGeneration.*changes|changes::diff|changes::published|Recorder' \
    | grep -v '^#' >"$work/$1.perf.txt" || true
  log "$1 under perf: $(tr -s ' ' <"$work/$1.perf.txt" | head -5)"
}

log "load at the start: $(uptime)"
uptime >"$work/load.start"
log "the first (full) refreshes of both repositories"
write_config ""
start_server
start_gateway
wait_succeeded on 1
wait_succeeded off 1
sitemap "$work/incremental-before"
stop_gateway
cp -a "$work/state" "$work/kept"
stop_server

log "incremental refreshes after every ${CHANGED_EVERY}th record changed (half of them deleted)"
start_server --changed-every "$CHANGED_EVERY" --response-date 2025-10-01T00:00:00Z
measure incremental "$ROUNDS"
stop_server

if [ "$FALLBACK" = 1 ]; then
  log "full harvests instead: deletedRecord transient, the full-harvest interval passed"
  rm -rf "$work/kept" "$work/state"
  write_config "full_harvest_interval_secs = 1"
  start_server --deleted-record transient
  start_gateway
  wait_succeeded on 1
  wait_succeeded off 1
  sitemap "$work/fallback-before"
  stop_gateway
  cp -a "$work/state" "$work/kept"
  stop_server
  sleep 1 # the full-harvest interval passes
  start_server --deleted-record transient --changed-every "$CHANGED_EVERY" \
    --response-date 2025-10-01T00:00:00Z
  measure fallback "$FALLBACK_ROUNDS"
  stop_server
fi
uptime >"$work/load.end"
log "load at the end: $(uptime)"
python3 benches/incremental/changelists_report.py "$work" "$hz" "$RECORDS" "$CHANGED_EVERY" \
  >"$work/section.md"
cat "$work/section.md"
# The section replaces its previous figures at the end of RESULTS.md (run.sh keeps it there).
results=benches/incremental/RESULTS.md
if [ "$RECORDS" = 1000000 ] && [ "$CHANGED_EVERY" = 100 ]; then
  sed -i '/^## What the Change Lists cost/,$d' "$results"
  sed -i -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$results" # no blank lines at the end
  printf '\n' >>"$results"
  cat "$work/section.md" >>"$results"
fi
