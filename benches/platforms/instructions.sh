#!/usr/bin/env bash
# The landing rules' cost in instructions (valgrind's cachegrind, no cache simulation): the same
# exports as benches/compare.sh's platforms benchmark, two binaries one after the other, each
# counted once. Instruction counts do not move with the machine's load, which CPU-seconds on a
# shared 2-core machine do (several percent from run to run, more under a neighbour's build):
# they are the figure to read a 5% target against, CPU-seconds the one to confirm it with.
#
#   bash benches/platforms/instructions.sh BEFORE AFTER      # two binaries (paths)
#   RECORDS=100000 SHAPES="dspace eprints generic" bash benches/platforms/instructions.sh ...
#
# Knobs: RECORDS (100000: under valgrind an export runs about 30 times slower), PORT (18797),
# SHAPES ("dspace eprints generic"). Prints a table (shape, export, instructions before and after,
# ratio) and writes target/bench-platforms/instructions.tsv. Loopback only; the server is stopped
# on exit; installs valgrind with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# = 2 ] || { echo "usage: bash benches/platforms/instructions.sh BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
RECORDS=${RECORDS:-100000}
PORT=${PORT:-18797}
SHAPES=${SHAPES:-dspace eprints generic}
work=target/bench-platforms
mkdir -p "$work"
# shellcheck source=benches/lib.sh
source benches/lib.sh
install_missing valgrind:valgrind
server_bin=target/bench-server/release/oai-bench-server
[ -x "$server_bin" ] || build_server
declare -A bin_of=([before]=$1 [after]=$2)
trap cleanup EXIT INT TERM
out=$work/instructions.tsv
: >"$out"
for shape in $SHAPES; do
  case $shape in
    dspace) base="http://127.0.0.1:$PORT/oai/request" variants="dspace auto" ;;
    eprints) base="http://127.0.0.1:$PORT/cgi/oai2" variants="eprints auto" ;;
    generic) base="http://127.0.0.1:$PORT/oai/request" variants="auto generic" ;;
    *) log "unknown shape $shape"; exit 2 ;;
  esac
  "$server_bin" --records "$RECORDS" --page-size 500 --port "$PORT" --shape "$shape" \
    >"$work/instructions-server.log" 2>&1 &
  pids=($!)
  wait_port "$PORT" "${pids[0]}" "$work/instructions-server.log"
  for variant in $variants; do
    for side in before after; do
      rm -rf "$work/out-instructions"
      timeout 1800 valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file="$work/cachegrind-$shape-$variant-$side.out" \
        "${bin_of[$side]}" export --base-url "$base" --public-url "http://127.0.0.1:$PORT/" \
        --out "$work/out-instructions" --no-progress -q --platform "$variant" \
        >"$work/instructions-$side.log" 2>&1 || { tail -5 "$work/instructions-$side.log" >&2; exit 1; }
      ir=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$work/cachegrind-$shape-$variant-$side.out")
      printf '%s\t%s\t%s\t%s\n' "$shape" "$variant" "$side" "$ir" >>"$out"
      log "$shape shape, --platform $variant, $side: $ir instructions"
    done
  done
  kill "${pids[0]}" 2>/dev/null || true
  wait "${pids[0]}" 2>/dev/null || true
  pids=()
done
python3 - "$out" "$RECORDS" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
ir = {(s, v, side): int(n) for s, v, side, n in rows}
print(f"| shape ({int(sys.argv[2]):,} records) | export | instructions before | after | after/before |")
print("| --- | --- | ---: | ---: | ---: |")
for s, v in dict.fromkeys((s, v) for s, v, _, _ in rows):
    b, a = ir[(s, v, "before")], ir[(s, v, "after")]
    print(f"| {s} | `--platform {v}` | {b:,} | {a:,} | {a / b:.3f} |")
PY
