#!/usr/bin/env bash
# Harvest benchmark: oai-bridge exports a synthetic repository of 1,000,000 records (500 a page,
# ~2 KB of oai_dc each) from a fast pre-rendering local server, and in the same run Sickle (with
# lxml) harvests the same server. Reports records/s, CPU-seconds per million records and peak RSS
# of both, the ratios, the URL-set comparison, and a second export whose pages exceed 10 MB.
# Writes the report to benches/harvest/RESULTS.md (and prints it).
#
#   bash benches/harvest/run.sh
#
# Knobs (environment): RECORDS (1000000), PAGE_SIZE (500), BIG_RECORDS (60000),
# BIG_PAGE_SIZE (6000, ~12.5 MB pages), PORT (18765), STRICT=1 (exit 3 when a target is missed),
# REV=<commit> to measure that commit (built from `git archive` in target/bench-rev/, lib.sh's
# build_rev) instead of the working tree.
# Exit status: 0, 1 when a harvest failed or the URL sets differ, 3 (STRICT) on a missed target.
# Everything it builds or writes stays under target/ (target/bench-harvest/ for the run's files).
# Loopback only; every step is bounded by `timeout`; the server is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-1000000}
PAGE_SIZE=${PAGE_SIZE:-500}
BIG_RECORDS=${BIG_RECORDS:-60000}
BIG_PAGE_SIZE=${BIG_PAGE_SIZE:-6000}
PORT=${PORT:-18765}
STRICT=${STRICT:-0}
SICKLE_VERSION=0.7.0
LXML_VERSION=6.1.3

bench=benches/harvest
work=target/bench-harvest
venv=target/bench-venv
server_bin=target/bench-server/release/oai-bench-server
ours_bin=$work/oai-bridge
REV=${REV:-}
base_url="http://127.0.0.1:$PORT/oai/request"
public_url="http://127.0.0.1:$PORT/oai/"
clk_tck=$(getconf CLK_TCK)

# shellcheck source=benches/lib.sh
source benches/lib.sh

server_pid=
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
trap stop_server EXIT INT TERM

# --- tools -------------------------------------------------------------------------------------
if [ ! -x /usr/bin/time ]; then
  log "installing GNU time"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq time >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq time >/dev/null; fi
fi
if ! "$venv/bin/python" -c "import sickle, lxml" 2>/dev/null; then
  log "creating $venv with Sickle $SICKLE_VERSION and lxml $LXML_VERSION"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install -q "sickle==$SICKLE_VERSION" "lxml==$LXML_VERSION"
fi
peer_version=$("$venv/bin/python" - <<'PY'
import importlib.metadata as m
import lxml.etree as e
libxml2 = ".".join(map(str, e.LIBXML_VERSION))
print(f"Sickle {m.version('sickle')}, lxml {m.version('lxml')} (libxml2 {libxml2}), requests {m.version('requests')}")
PY
)

rm -rf "$work"
mkdir -p "$work"
if [ -n "$REV" ]; then
  rev=$(git rev-parse --short "$REV^{commit}")
  build_rev "$rev" "$ours_bin"
  describe="$rev"
else
  log "building oai-bridge (release, working tree) and the benchmark server"
  timeout 1800 cargo build --release --locked --bin oai-bridge
  # A copy, so a rebuild during the run cannot change what is measured.
  cp target/release/oai-bridge "$ours_bin"
  describe="$(git rev-parse --short HEAD)"
  if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock build.rs)" ]; then
    describe="$describe with uncommitted changes to src/ or Cargo.*"
  fi
fi
build_server

# --- helpers -----------------------------------------------------------------------------------
# start_server RECORDS PAGE_SIZE LOG EXPECTED_URLS: renders everything, then listens; waits (bounded)
# until the port accepts connections.
start_server() {
  stop_server
  "$server_bin" --records "$1" --page-size "$2" --port "$PORT" --expected-urls "$4" 2>"$3" &
  server_pid=$!
  local waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      cat "$3" >&2
      log "the server exited before listening"
      exit 1
    fi
    if ((waited >= 3000)); then
      log "the server did not listen within 300 s"
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  cat "$3" >&2
}

server_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }

# timed NAME TIMEOUT CMD...: runs CMD under GNU time -v into $work/NAME.time, bounded; records the
# server's CPU-seconds spent meanwhile in $work/server-cpu-NAME. Never fails the script.
timed() {
  local name=$1 limit=$2
  shift 2
  local before after status=0
  before=$(server_ticks)
  cut -d' ' -f1 /proc/loadavg >"$work/load-$name"
  timeout "$limit" /usr/bin/time -v -o "$work/$name.time" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" || status=$?
  after=$(server_ticks)
  awk -v a="$after" -v b="$before" -v t="$clk_tck" 'BEGIN { printf "%.2f\n", (a - b) / t }' >"$work/server-cpu-$name"
  if [ "$status" != 0 ]; then
    log "$name exited with status $status"
    tail -n 20 "$work/$name.stderr" >&2 || true
  fi
  return 0
}

# --- the million-record harvest: ours, then the peer, against the same server ---------------------
log "rendering $RECORDS records, $PAGE_SIZE a page"
start_server "$RECORDS" "$PAGE_SIZE" "$work/server.log" "$work/expected.urls"

log "oai-bridge export"
timed ours 1800 "$ours_bin" export --base-url "$base_url" --out "$work/ours-out" \
  --public-url "$public_url" --no-progress -q
cat "$work/ours.stdout" >&2
if [ -d "$work/ours-out" ]; then
  python3 "$bench/sitemap_urls.py" "$work/ours-out" "$work/ours.urls" || true
fi

# What the profiles (Signmap, OCX, DiWoo, CDIF) add to this export is measured apart, runs
# alternating with the plain export: benches/profiles/run.sh.

log "peer: Sickle + lxml"
timed peer 5400 "$venv/bin/python" "$bench/peer_sickle.py" "$base_url" "$work/peer.urls"
cat "$work/peer.stderr" >&2

# --- pages over 10 MB ----------------------------------------------------------------------------
log "pages over 10 MB: rendering $BIG_RECORDS records, $BIG_PAGE_SIZE a page"
start_server "$BIG_RECORDS" "$BIG_PAGE_SIZE" "$work/big-server.log" "$work/big-expected.urls"
log "oai-bridge export (pages over 10 MB)"
timed big 900 "$ours_bin" export --base-url "$base_url" --out "$work/big-out" \
  --public-url "$public_url" --no-progress -q
cat "$work/big.stdout" >&2
if [ -d "$work/big-out" ]; then
  python3 "$bench/sitemap_urls.py" "$work/big-out" "$work/big-ours.urls" || true
fi
stop_server

# --- report --------------------------------------------------------------------------------------
command="bash benches/harvest/run.sh"
[ "$RECORDS" != 1000000 ] && command="RECORDS=$RECORDS $command"
[ -n "$REV" ] && command="REV=$rev $command"
strict=()
[ "$STRICT" = 1 ] && strict=(--strict)
python3 "$bench/report.py" --work "$work" --records "$RECORDS" --big-records "$BIG_RECORDS" \
  --command "$command" --peer-version "$peer_version" --ours-version "$describe" --out "$bench/RESULTS.md" "${strict[@]}"
