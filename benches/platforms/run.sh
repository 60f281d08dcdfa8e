#!/usr/bin/env bash
# Platforms benchmark (issue 20, point 11): what the platform-aware landing rules cost. The
# harvest benchmark's server (benches/harvest/server) serves a million records in three shapes
# (--shape): its own generic oai_dc, DSpace 6's and EPrints 3.4's (docs/platforms.md). Against
# each, exports with different --platform alternate, ROUNDS times after one uncounted warm-up:
#   generic shape   generic | auto | dspace | eprints
#   dspace shape    generic | generic+root | dspace | auto
#   eprints shape   generic | generic+root | eprints | auto
# On the generic shape (the harvest benchmark's own records: the target's literal reading)
# `dspace` and `eprints` apply their rules to records that are neither platform's: the same
# bytes, about as many URLs published (their scope is the host's root; not compared with a list).
# On the platforms' shapes `generic` is the baseline the target is read against: the same bytes
# under Google's rule, whose scope (the baseURL's directory, /oai/ or /cgi/) holds none of their
# URLs, so it ends with "nothing to publish" (exit 1) after the whole harvest, writing no
# sitemap. `generic+root` is Google's rule over the platform rules' own scope (--scope
# http://127.0.0.1:PORT/): it publishes the URLs that happen to be there (local Handle URLs and
# bitstreams; EPrints' documents) and writes their sitemaps, a second reference.
# Each export is timed with GNU time (CPU = user + sys seconds). report.py writes the median of
# each, its ratio to `generic` of the same shape against the target (at most 1.10x), the URLs
# published and whether they are exactly the server's list of what the shape's own rule should
# publish (--expected-urls), into benches/platforms/RESULTS.md (also printed). README.md says
# how to read it and where the CPU goes.
#
#   bash benches/platforms/run.sh
#   RECORDS=20000 ROUNDS=1 bash benches/platforms/run.sh   # a quick check of the script
#
# Knobs (environment): RECORDS (1000000), ROUNDS (3), PORT (18795), SHAPES ("generic dspace
# eprints"), REV=<commit> to measure that commit (built from `git archive` in target/bench-rev/,
# lib.sh's build_rev) instead of the working tree, DROP_CACHES=1 (as root: drop the page cache
# before each run, as benches/profiles does; off by default, these exports write little),
# STRICT=1 (exit 3 when a platform's export costs more than 1.10x generic).
# Exit status: 0; 1 when an export that should publish failed or a URL set differs; 3 (STRICT).
# About 5 minutes for the million records on 2 cores after the build (each shape's server
# renders its 2.1-2.5 GB of pages first; an export takes about 3 s). Loopback only; every step
# is bounded by `timeout`; the server is stopped on exit. Everything it writes stays under
# target/bench-platforms/, target/bench-server/ and benches/platforms/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-1000000}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18795}
SHAPES=${SHAPES:-generic dspace eprints}
DROP_CACHES=${DROP_CACHES:-0}
STRICT=${STRICT:-0}
REV=${REV:-}
work=target/bench-platforms
bin=$work/oai-bridge
server_bin=target/bench-server/release/oai-bench-server
mkdir -p "$work"
# One run at a time: two would share the port, the folders and the CPU.
exec 9>"$work/lock"
flock -n 9 || { echo "another platforms benchmark is running" >&2; exit 1; }
# shellcheck source=benches/lib.sh
source benches/lib.sh

install_missing /usr/bin/time:time python3:python3
if [ -n "$REV" ]; then
  rev=$(git rev-parse --short "$REV^{commit}")
  build_rev "$rev" "$bin"
  build_server
  describe=$rev
else
  # The working tree; a copy of the binary, so that a rebuild during the run cannot change what
  # is measured.
  build_binaries
  describe=$(git rev-parse --short HEAD)
  if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock build.rs)" ]; then
    describe="$describe with uncommitted changes to src/ or Cargo.*"
  fi
fi

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
# lib.sh's cleanup stops what is in `pids` (the server of the shape being measured).
trap 'stop_server; cleanup' EXIT INT TERM

origin="http://127.0.0.1:$PORT"
: >"$work/times.tsv"
: >"$work/servers.tsv"

# run SHAPE VARIANT ROUND: one export, timed; a row of times.tsv. Never fails the script.
run() {
  local shape=$1 variant=$2 round=$3 name=$1-$2 status=0 platform=${2%+root} extra=()
  local out=$work/out-$name base
  [ "$variant" = generic+root ] && extra=(--scope "$origin/")
  case $shape in
    eprints) base="$origin/cgi/oai2" ;;
    *) base="$origin/oai/request" ;;
  esac
  rm -rf "$out"
  sync
  if [ "$DROP_CACHES" = 1 ] && [ "$(id -u)" = 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  timeout 1800 /usr/bin/time -o "$work/time" -f "%e	%U	%S	%M" "$bin" export \
    --base-url "$base" --public-url "$origin/" --out "$out" --no-progress -q \
    --platform "$platform" "${extra[@]}" >"$work/$name.stdout" 2>"$work/$name.stderr" || status=$?
  # The platform in effect, from the summary (generic's failed run has none).
  local detected
  detected=$(sed -n 's/^  platform        \([a-z]*\) .*/\1/p' "$work/$name.stdout")
  local urls=0 check=none
  if [ -d "$out" ]; then
    python3 benches/harvest/sitemap_urls.py "$out" "$work/$name.urls" 2>/dev/null || true
    urls=$(wc -l <"$work/$name.urls")
    # Compared with the server's list: what the shape's own rule publishes (generic's on the
    # generic shape, the platform's on its shape, and auto's, which must find it).
    local compare=0
    case $shape/$variant in
      generic/generic | generic/auto | dspace/dspace | dspace/auto | eprints/eprints | eprints/auto) compare=1 ;;
    esac
    if [ "$compare" = 1 ]; then
      if cmp -s "$work/$name.urls" "$work/$shape.expected"; then
        check=equal
      else
        check="differs: $(comm -23 "$work/$name.urls" "$work/$shape.expected" | wc -l) only published, $(comm -13 "$work/$name.urls" "$work/$shape.expected" | wc -l) missing"
      fi
    fi
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$shape" "$variant" "$round" "$status" \
    "$(cat "$work/time" | grep -v '^Command' | tail -1)" "$load" "${detected:-none}" "$urls" \
    "$check" >>"$work/times.tsv"
  log "$shape/$variant (round $round): exit $status, $(grep -v '^Command' "$work/time" | tail -1 | cut -f2,3 | tr '\t' ' ') (user s, sys s), $urls URLs, $check"
  # generic's exit 1 on the platforms' shapes is expected (nothing to publish).
  if [ "$status" != 0 ] && { [ "$variant" != generic ] || [ "$shape" = generic ]; }; then
    tail -n 5 "$work/$name.stderr" "$work/$name.stdout" >&2 || true
  fi
  rm -rf "$out"
}

for shape in $SHAPES; do
  case $shape in
    generic) variants="generic auto dspace eprints" ;;
    dspace) variants="generic generic+root dspace auto" ;;
    eprints) variants="generic generic+root eprints auto" ;;
    *) log "unknown shape $shape"; exit 1 ;;
  esac
  log "starting the upstream: $RECORDS records in the $shape shape"
  "$server_bin" --records "$RECORDS" --page-size 500 --port "$PORT" --shape "$shape" \
    --expected-urls "$work/$shape.expected" >"$work/server-$shape.log" 2>&1 &
  server_pid=$!
  pids=("$server_pid")
  wait_port "$PORT" "$server_pid" "$work/server-$shape.log"
  cat "$work/server-$shape.log" >&2
  printf '%s\t%s\n' "$shape" "$(sed -n 's/^oai-bench-server: \([0-9]* records in .*\)$/\1/p' \
    "$work/server-$shape.log" | head -1)" >>"$work/servers.tsv"
  # Round 0 is not counted: the first runs after a build or a server start varied most.
  for round in $(seq 0 "$ROUNDS"); do
    for variant in $variants; do run "$shape" "$variant" "$round"; done
  done
  stop_server
  pids=()
done

# --- report --------------------------------------------------------------------------------------
command="bash benches/platforms/run.sh"
[ "$ROUNDS" != 3 ] && command="ROUNDS=$ROUNDS $command"
[ "$RECORDS" != 1000000 ] && command="RECORDS=$RECORDS $command"
[ -n "$REV" ] && command="REV=$rev $command"
machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); Linux $(uname -r); $(rustc --version 2>/dev/null || echo rustc unknown)"
status=0
python3 benches/platforms/report.py "$work/times.tsv" "$work/servers.tsv" "$describe" "$RECORDS" \
  "$STRICT" "$command" "$machine" "$(date -u '+%Y-%m-%d %H:%M UTC')" >benches/platforms/RESULTS.md \
  || status=$?
cat benches/platforms/RESULTS.md
exit "$status"
