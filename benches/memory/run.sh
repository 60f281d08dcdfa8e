#!/usr/bin/env bash
# Memory benchmark (issue 30): peak RSS, CPU-seconds per million records and the bytes spilled
# to disk of `oai-bridge export` at 1, 4 and 16 million records (SIZES, in millions; 50 runs
# outside .ci/run: `SIZES=50`), the sitemap alone and with the XML profiles on (Signmap, OCX,
# five DiWoo categories). The upstream is benches/harvest/server with --on-demand: it renders
# each page as it is asked for, since 50 million rendered records (about 110 GB) fit nowhere.
# Today's main (BASE) runs too, alternated with the working tree (ROUNDS times at 1 million),
# and the two outputs must be byte-identical: the sitemap alone up to 16 million, with profiles
# up to COMPARE_UP_TO million (two outputs with profiles at 16 million outgrow the disk). Past
# the inventory's memory budget (about 1.2 million records) the working tree spills, so the
# comparison at 4 and 16 million is the spilled path's against main's in-memory one.
# Writes benches/memory/RESULTS.md (and prints it).
#
#   bash benches/memory/run.sh
#   SIZES="1 4 16 50" bash benches/memory/run.sh
#
# Knobs (environment): WORK (target/bench-memory: where the binaries, outputs and spill go), SIZES ("1 4 16"), BASE (main), ROUNDS (2, at 1 million), PORT (18767),
# PROFILES (1: also the runs with profiles), PLAIN (1; 0 leaves out the runs of the sitemap alone,
# as for 50 million with profiles once the plain figure is known), PROFILES_UP_TO (50: the runs with profiles up to
# that many million; 16 million with profiles writes about 21 GB), COMPARE_UP_TO (4), OURS_BIN and BASE_BIN (binaries
# built already, copied instead of building; OURS_DESCRIBE names the first in the report).
# It needs about 1.3 GB of disk a million records with profiles (the export's own files), which
# each run removes after measuring; the spill files take about a third of the URLs' bytes more.
# Loopback only; every step is bounded by `timeout`; what it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZES=${SIZES:-"1 4 16"}
BASE=${BASE:-main}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18767}
PROFILES=${PROFILES:-1}
PLAIN=${PLAIN:-1}
PROFILES_UP_TO=${PROFILES_UP_TO:-50}
COMPARE_UP_TO=${COMPARE_UP_TO:-4}
work=${WORK:-target/bench-memory}
bin=$work/oai-bridge
base_bin=$work/oai-bridge-base

# shellcheck source=benches/lib.sh
source benches/lib.sh
install_missing /usr/bin/time:time

rm -rf "$work"
mkdir -p "$work"
describe="$(git rev-parse --short HEAD)"
if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ]; then
  describe="$describe with uncommitted changes to src/ or Cargo.*"
fi
# OURS_BIN / BASE_BIN: binaries built already (a loaded machine takes half an hour for one).
if [ -n "${OURS_BIN:-}" ]; then
  cp "$OURS_BIN" "$bin"
  build_server
  describe=${OURS_DESCRIBE:-"$OURS_BIN"}
else
  build_binaries
fi
if [ -n "${BASE_BIN:-}" ]; then cp "$BASE_BIN" "$base_bin"; else build_rev "$BASE" "$base_bin"; fi

diwoo=()
for i in 0 1 2 3 4; do diwoo+=(--diwoo "com_$i=$((i + 1))"); done
declare -A flags=(
  [plain]=""
  [profiles]="--signmap --ocx ${diwoo[*]}"
)
kinds=()
[ "$PLAIN" = 1 ] && kinds+=(plain)
[ "$PROFILES" = 1 ] && kinds+=(profiles)

: >"$work/runs.tsv"
# run BINARY NAME MILLIONS KIND ROUND [ENV...]: one export under GNU time; a line of runs.tsv:
# name, millions, kind, round, user s, sys s, max RSS KB, wall s, spill bytes, bytes written.
run() {
  local binary=$1 name=$2 millions=$3 kind=$4 round=$5
  shift 5
  local out=$work/out-$name
  rm -rf "$out"
  # shellcheck disable=SC2086
  env "$@" timeout 7200 /usr/bin/time -o "$work/time" -f "%U\t%S\t%M\t%e" "$binary" export \
    --base-url "http://127.0.0.1:$PORT/oai/request" --public-url "https://127.0.0.1:$PORT/oai/" \
    --scope "https://127.0.0.1:$PORT/oai/" --out "$out" --no-progress -q --json ${flags[$kind]} \
    >"$work/$name.json" 2>"$work/$name.stderr" || { tail "$work/$name.stderr" >&2; exit 1; }
  local spill
  spill=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("spill_bytes", 0))' \
    "$work/$name.json")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$millions" "$kind" "$round" "$(cat "$work/time")" \
    "$spill" "$(du -sb "$out" | cut -f1)" >>"$work/runs.tsv"
  log "$name ${millions}M $kind (round $round): $(tr '\t' ' ' <"$work/time") (user s, sys s, KB, wall s); spilled $spill bytes"
}

# same A B: the two outputs byte for byte (the exports ran against the same records).
same() {
  if diff -r -q "$work/out-$1" "$work/out-$2" >"$work/diff-$1-$2" 2>&1; then
    printf '%s\t%s\t%s\tidentical\n' "$1" "$2" "$millions" >>"$work/same.tsv"
  else
    printf '%s\t%s\t%s\tDIFFERENT\n' "$1" "$2" "$millions" >>"$work/same.tsv"
    head "$work/diff-$1-$2" >&2
  fi
}
: >"$work/same.tsv"

started=$(date +%s)
for millions in $SIZES; do
  records=$((millions * 1000000))
  stop_upstream 2>/dev/null || true
  log "upstream: $records records, rendered on demand"
  start_upstream "$PORT" --records "$records" --page-size 500 --https-identifiers --on-demand
  for kind in "${kinds[@]}"; do
    [ "$kind" = profiles ] && [ "$millions" -gt "$PROFILES_UP_TO" ] && continue
    rounds=1
    [ "$millions" = 1 ] && rounds=$ROUNDS
    # Two outputs side by side: the base's too, when the disk holds both.
    compare=0
    if [ "$millions" -le "$COMPARE_UP_TO" ] || { [ "$kind" = plain ] && [ "$millions" -le 16 ]; }; then
      compare=1
    fi
    for ((r = 1; r <= rounds; r++)); do
      [ "$compare" = 1 ] && run "$base_bin" "base-$kind" "$millions" "$kind" "$r"
      run "$bin" "ours-$kind" "$millions" "$kind" "$r"
    done
    [ "$compare" = 1 ] && same "base-$kind" "ours-$kind"
    rm -rf "$work/out-base-$kind" "$work/out-ours-$kind"
  done
done
elapsed=$(($(date +%s) - started))

PROFILES_UP_TO=$PROFILES_UP_TO python3 benches/memory/report.py "$work/runs.tsv" "$work/same.tsv" "$describe" "$BASE" "$elapsed" \
  "$SIZES" | tee benches/memory/RESULTS.md
