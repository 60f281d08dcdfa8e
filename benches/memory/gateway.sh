#!/usr/bin/env bash
# Gateway memory benchmark (issue 30 point 2): REPOS repositories of RECORDS records each, one
# `benches/harvest/server --on-demand` upstream each (on ports of their own, so that
# per_host_concurrency lets them refresh together), refreshed at once by one `oai-bridge serve`
# (max_concurrent_refreshes = REPOS, start_spread_secs = 0), once for each [server]
# memory_budget_bytes of BUDGETS ("default": the key left out, REPOS x 192 MiB). Each run
# starts from an empty state directory and measures: the time until every repository is
# published (/readyz 200); the gateway's peak RSS (VmHWM); what /metrics said during the
# refreshes, sampled every 0.25 s (the most the refreshes held in memory and on disk together,
# each repository's most, and whether the together ever passed the budget); what each refresh's
# history entry recorded (the most it held and spilled); and the SHA-256 of every file served,
# which must be the same in every run. Writes benches/memory/GATEWAY.md (and prints it).
#
#   bash benches/memory/gateway.sh
#   RECORDS=250000 BUDGETS="default 67108864" bash benches/memory/gateway.sh
#
# Knobs (environment): REPOS (4), RECORDS (1000000), BUDGETS ("default 134217728"), PROFILES
# (0; 1: the Signmap too, whose records count in the budget: about 2.6 GB of state a million
# records), PORT (18900: the gateway; its admin listener PORT+1, the upstreams PORT+2...),
# OURS_BIN (a binary built already, copied instead of building). Disk: about 400 MB of state a
# million records (plain), removed after each run. Loopback only; every step is bounded by
# `timeout`; what it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

REPOS=${REPOS:-4}
RECORDS=${RECORDS:-1000000}
BUDGETS=${BUDGETS:-"default 134217728"}
PROFILES=${PROFILES:-0}
PORT=${PORT:-18900}
ADMIN=$((PORT + 1))
work=$(pwd)/target/bench-gateway-memory
bin=$work/oai-bridge
helper=$(pwd)/benches/memory/gateway.py
# shellcheck source=benches/lib.sh
source benches/lib.sh
export OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$ADMIN
install_missing curl:curl python3:python3

rm -rf "$work"
mkdir -p "$work"
describe="$(git rev-parse --short HEAD)"
[ -z "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ] ||
  describe="$describe with uncommitted changes to src/ or Cargo.*"
if [ -n "${OURS_BIN:-}" ]; then
  cp "$OURS_BIN" "$bin"
  build_server
else
  build_binaries
fi

for ((i = 0; i < REPOS; i++)); do
  start_upstream $((PORT + 2 + i)) --records "$RECORDS" --page-size 500 --on-demand
done
log "$REPOS upstreams of $RECORDS records each"

# config DIR BUDGET: DIR's bridge.toml.
config() {
  {
    echo '[server]'
    echo "listen = \"127.0.0.1:$PORT\""
    echo 'state_dir = "state"'
    echo 'public_url = "https://maps.example/"'
    [ "$2" = default ] || echo "memory_budget_bytes = $2"
    echo '[harvest]'
    echo "max_concurrent_refreshes = $REPOS"
    echo 'start_spread_secs = 0'
    for ((i = 0; i < REPOS; i++)); do
      echo '[[repository]]'
      echo "name = \"r$i\""
      echo "base_url = \"http://127.0.0.1:$((PORT + 2 + i))/oai/request\""
      if [ "$PROFILES" = 1 ]; then echo 'signmap = true'; fi
    done
  } >"$1/bridge.toml"
}

: >"$work/runs.tsv"
for budget in $BUDGETS; do
  dir=$work/run-$budget
  mkdir -p "$dir"
  config "$dir" "$budget"
  log "budget $budget: starting the gateway"
  t0=$(date +%s.%N)
  "$bin" serve --config "$dir/bridge.toml" >"$dir/gateway.out" 2>"$dir/gateway.log" &
  pid=$!
  pids+=("$pid")
  wait_port "$ADMIN" "$pid" "$dir/gateway.log"
  python3 "$helper" sample "$ADMIN" "$dir/samples.tsv" "$dir/stop" &
  sampler=$!
  pids+=("$sampler")
  waited=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 200 ]; do
    kill -0 "$pid" 2>/dev/null || { tail "$dir/gateway.log" >&2; log "the gateway exited"; exit 1; }
    ((waited++ < 72000)) || { log "not published after 2 h"; exit 1; }
    sleep 0.1
  done
  wall=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
  touch "$dir/stop"
  wait "$sampler" || true
  hwm=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$pid/status")
  curl -s "http://127.0.0.1:$ADMIN/" >"$dir/status.html"
  curl -s "http://127.0.0.1:$ADMIN/metrics" >"$dir/metrics.txt"
  if grep -q 'oai_bridge_harvests_total{repository="[^"]*",outcome="failure"} [1-9]' "$dir/metrics.txt"; then
    grep 'refresh failed' "$dir/gateway.log" >&2 || true
    log "a refresh failed"
    exit 1
  fi
  timeout 600 python3 "$helper" hashes "$PORT" "$REPOS" >"$dir/hashes.txt"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  printf '%s\t%s\t%s\t%s\n' "$budget" "$wall" "$hwm" "$(du -sb "$dir/state" | cut -f1)" >>"$work/runs.tsv"
  log "budget $budget: published after $wall s, peak RSS $((hwm / 1024)) MiB"
  # The history entries, then the state goes (disk).
  for ((i = 0; i < REPOS; i++)); do
    sed "s/^/r$i\t/" "$dir/state/r$i/history.jsonl" >>"$dir/history.tsv"
  done
  rm -rf "$dir/state"
done

python3 "$helper" report "$work" "$describe" "$REPOS" "$RECORDS" "$PROFILES" "$BUDGETS" |
  tee benches/memory/GATEWAY.md
