#!/usr/bin/env bash
# Profiles one `oai-bridge export` against the benchmark server with perf (DWARF call graphs) and
# prints where the CPU goes, by pipeline stage and by hottest function (perf_categories.py).
#
#   bash benches/harvest/profile.sh            # 200,000 records, the binary of the last run.sh
#
# Knobs: RECORDS (200000), PAGE_SIZE (500), PORT (18766), BIN (target/bench-harvest/oai-bridge,
# else target/release/oai-bridge), EXPORT_ARGS (more export flags, e.g. "--signmap --ocx" to
# profile the profiles). Writes under target/bench-harvest-profile/. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-200000}
PAGE_SIZE=${PAGE_SIZE:-500}
PORT=${PORT:-18766}
out=target/bench-harvest-profile
server_bin=target/bench-server/release/oai-bench-server
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  BIN=target/bench-harvest/oai-bridge
  [ -x "$BIN" ] || BIN=target/release/oai-bridge
fi

if ! command -v perf >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq linux-perf >/dev/null; fi
fi
[ -x "$BIN" ] || timeout 1800 cargo build --release --locked --bin oai-bridge
timeout 900 cargo build --release --locked --manifest-path benches/harvest/server/Cargo.toml --target-dir target/bench-server

rm -rf "$out"
mkdir -p "$out"
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null || true' EXIT INT TERM
"$server_bin" --records "$RECORDS" --page-size "$PAGE_SIZE" --port "$PORT" 2>"$out/server.log" &
server_pid=$!
for _ in $(seq 1 3000); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$out/server.log" >&2; exit 1; }
  sleep 0.1
done
cat "$out/server.log" >&2

timeout 900 perf record -q -F 999 -g --call-graph dwarf,16384 -o "$out/perf.data" -- \
  "$BIN" export --base-url "http://127.0.0.1:$PORT/oai/request" --out "$out/export" \
  --public-url "http://127.0.0.1:$PORT/oai/" --no-progress -q ${EXPORT_ARGS:-} >"$out/export.log"
kill "$server_pid" 2>/dev/null || true
server_pid=
perf script -i "$out/perf.data" 2>/dev/null >"$out/perf.txt"
samples=$(grep -c 'cpu-clock\|cycles' "$out/perf.txt" || true)
# Samples are taken at 999 Hz of CPU time, so their count gives the CPU-seconds of the export.
cpu=$(awk -v n="$samples" 'BEGIN { printf "%.2f", n / 999 }')
echo "== $BIN, $RECORDS records: about $cpu CPU-seconds sampled" >&2
python3 benches/harvest/perf_categories.py "$cpu" "$RECORDS" <"$out/perf.txt" | tee "$out/summary.txt"
