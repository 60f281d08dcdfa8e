#!/usr/bin/env bash
# Load test (issue 6, point 6): wrk holds 64 connections on the gateway for 60 seconds while the
# gateway harvests a 250,000-record repository in full, back to back (a refresh every second,
# each a full harvest: the upstream says deletedRecord=transient and full_harvest_interval_secs is
# 1), so generations are swapped under the load. Every request is for a file of the current
# generation (robots.txt, indexes, every shard plain and gzipped, Signmap), in a fixed rotation.
# After a 10-second warm-up (the cache fills), the run passes with zero errors (no socket error,
# no timeout, no answer other than 2xx/3xx), at least two refreshes finished during the load, and
# memory flat: the gateway's resident memory, sampled five times a second (with the true peak
# between samples: VmHWM, reset through clear_refs), rises and falls with each refresh; the last
# whole refresh cycle must peak no higher than the first (+10%), and what stays after the last
# swap (the median 2-6 s after it) no higher than after the first (+10%). nginx serving the same files from
# disk (gzip_static) under the same load, idle, is the peer.
# Writes benches/load/RESULTS.md (and prints it); exits 3 when a target is missed.
#
#   bash benches/load/run.sh          # about 4 minutes
#
# Knobs (environment): RECORDS (250000; at 1,000,000 a refresh under this load takes a minute), CONNECTIONS (64), DURATION (60 seconds), TIMEOUT (wrk's
# per-request timeout, 5 s). The gateway and nginx run on core 0, wrk and the upstream on core 1.
# Loopback only; installs wrk, nginx and GNU time with apt-get when missing; writes under
# target/bench-load/.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-250000}
CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-60}
TIMEOUT=${TIMEOUT:-5}
UPSTREAM=18831
GATEWAY=18832
NGINX=18833
work=$(pwd)/target/bench-load
bin=$work/oai-bridge
server_bin=target/bench-server/release/oai-bench-server
# shellcheck source=benches/lib.sh
. benches/lib.sh

install_missing wrk:wrk nginx:nginx-light taskset:util-linux curl:curl

rm -rf "$work"
mkdir -p "$work/www" "$work/state"
build_binaries

metric() { curl -s "http://127.0.0.1:$GATEWAY/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

log "upstream: $RECORDS records, deletedRecord=transient"
taskset -c 1 "$server_bin" --records "$RECORDS" --page-size 500 --port "$UPSTREAM" \
  --deleted-record transient 2>"$work/upstream.log" &
pids+=($!)
wait_port "$UPSTREAM" $! "$work/upstream.log"

cat >"$work/bridge.toml" <<EOF
[server]
listen = "127.0.0.1:$GATEWAY"
state_dir = "$work/state"
[[repository]]
name = "big"
base_url = "http://127.0.0.1:$UPSTREAM/oai/request"
gzip = true
signmap = true
refresh_interval_secs = 1
full_harvest_interval_secs = 1
EOF
taskset -c 0 "$bin" serve --config "$work/bridge.toml" >"$work/gateway.out" 2>"$work/gateway.log" &
gateway_pid=$!
pids+=("$gateway_pid")
wait_port "$GATEWAY" "$gateway_pid" "$work/gateway.log"
waited=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY/readyz")" = 200 ]; do
  ((waited++ < 3000)) || { log "the gateway was not ready within 300 s"; cat "$work/gateway.log" >&2; exit 1; }
  sleep 0.1
done

# The rotation: every file of the generation the gateway serves, copied for nginx too (with the
# gzip siblings that gzip_static serves, so both answer the same bytes).
fetch() { # PATH: into www, plain and, for .xml, its gzip sibling
  mkdir -p "$(dirname "$work/www/$1")"
  curl -sf -o "$work/www/$1" "http://127.0.0.1:$GATEWAY/$1"
  case $1 in *.xml) curl -sf -H 'Accept-Encoding: gzip' -o "$work/www/$1.gz" "http://127.0.0.1:$GATEWAY/$1" ;; esac
}
: >"$work/paths"
add() { fetch "$1"; echo "/$1" >>"$work/paths"; }
add robots.txt
for index in sitemap.xml signmap.xml; do
  add "big/$index"
  for loc in $(grep -o '<loc>[^<]*</loc>' "$work/www/big/$index" | sed 's/<[^>]*>//g'); do
    add "big/${loc##*/}"
    case $loc in *.xml.gz) fetch "big/$(basename "$loc" .gz)" && echo "/big/$(basename "$loc" .gz)" >>"$work/paths" ;; esac
  done
done
files=$(wc -l <"$work/paths")
log "$files paths in the rotation"

cat >"$work/mix.lua" <<'LUA'
-- Every path of PATHS in turn, gzip accepted (as crawlers do).
local paths = {}
for line in io.lines(os.getenv("PATHS")) do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], { ["Accept-Encoding"] = "gzip" })
end
LUA

start_nginx_peer "$NGINX"
# Both must answer the same bytes for the same request, or the comparison means nothing.
while read -r path; do
  a=$(curl -s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$GATEWAY$path" | sha256sum)
  b=$(curl -s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$NGINX$path" | sha256sum)
  [ "$a" = "$b" ] || { log "$path differs between the gateway and nginx"; exit 1; }
done <"$work/paths"

wrk_run() { # OUT PORT (DURATION from the environment)
  PATHS=$work/paths taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout "${TIMEOUT}s" \
    --latency -s "$work/mix.lua" "http://127.0.0.1:$2" >"$1" 2>&1 || { cat "$1" >&2; exit 1; }
}

log "nginx (the peer, idle): $CONNECTIONS connections for $DURATION s"
wrk_run "$work/nginx.wrk" "$NGINX"

log "warming the gateway's cache: $CONNECTIONS connections for 10 s"
DURATION=10 wrk_run "$work/warmup.wrk" "$GATEWAY"

log "the gateway, refreshing back to back: $CONNECTIONS connections for $DURATION s"
before=$(metric 'oai_bridge_harvests_total{repository="big",outcome="success"}')
failed_before=$(metric 'oai_bridge_harvests_total{repository="big",outcome="failure"}')
pages_before=$(metric 'oai_bridge_upstream_requests_total{repository="big"}')
: >"$work/rss"
# Five times a second: the resident memory now, and the peak since the last sample (VmHWM, then
# reset by writing 5 to clear_refs), so that no short peak between two samples is missed.
echo 5 >"/proc/$gateway_pid/clear_refs" 2>/dev/null || true # the peak of the warm-up is not this run's
(
  while kill -0 "$gateway_pid" 2>/dev/null; do
    echo "$(date +%s.%N) $(awk '/^VmRSS/ { rss = $2 } /^VmHWM/ { hwm = $2 } END { print rss, hwm }' "/proc/$gateway_pid/status")" >>"$work/rss"
    echo 5 >"/proc/$gateway_pid/clear_refs" 2>/dev/null || true
    sleep 0.2
  done
) &
sampler=$!
pids+=("$sampler")
wrk_run "$work/gateway.wrk" "$GATEWAY"
kill "$sampler" 2>/dev/null || true
after=$(metric 'oai_bridge_harvests_total{repository="big",outcome="success"}')
failed_after=$(metric 'oai_bridge_harvests_total{repository="big",outcome="failure"}')
pages_after=$(metric 'oai_bridge_upstream_requests_total{repository="big"}')

python3 - "$work" "$RECORDS" "$CONNECTIONS" "$DURATION" "$TIMEOUT" "$files" \
  "$(( ${after:-0} - ${before:-0} ))" "$(( ${failed_after:-0} - ${failed_before:-0} ))" \
  "$(( ${pages_after:-0} - ${pages_before:-0} ))" <<'PY'
import datetime, pathlib, platform, re, subprocess, sys
work, records, conns, duration, timeout, files, refreshes, failures, pages = sys.argv[1:]
work = pathlib.Path(work)
refreshes, failures, pages = int(refreshes), int(failures), int(pages)

def parse(name):
    text = (work / f"{name}.wrk").read_text()
    def ms(label):
        value, unit = re.search(label + r"\s+([\d.]+)(us|ms|s)\b", text).groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    transfer = re.search(r"Transfer/sec:\s+(\S+)", text).group(1)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    errors = (int(bad.group(1)) if bad else 0) + (sum(map(int, sock.groups())) if sock else 0)
    detail = ", ".join(x.group(0) for x in (bad, sock) if x) or "none"
    return dict(requests=requests, rps=rps, transfer=transfer, p50=ms("50%"), p99=ms("99%"),
                errors=errors, detail=detail)

peer, ours = parse("nginx"), parse("gateway")
lines = [line.split() for line in (work / "rss").read_text().splitlines() if len(line.split()) == 3]
rss = [int(kb) / 1024 for _, kb, _ in lines]
# (time, the peak since the sample before): cycles are judged by their true peaks.
samples = [(float(t), int(kb) / 1024) for t, _, kb in lines]
# Refresh cycles: the samples between two swaps ("refresh done" in the log). Memory moves with
# each refresh (records in, files out); flat means the last whole cycle peaks no higher than the
# first one (+10%), and the memory left after the last swap is no more than after the first.
def stamp(line):
    t = line.split()[0].rstrip("Z")
    whole, _, frac = t.partition(".")
    return datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp() + float("0." + (frac or "0"))
swaps = [stamp(l) for l in (work / "gateway.log").read_text().splitlines() if "refresh done" in l]
swaps = [t for t in swaps if samples[0][0] <= t <= samples[-1][0]]
cycles = [[m for t, m in samples if a < t <= b] for a, b in zip(swaps, swaps[1:])]
cycles = [c for c in cycles if c]
# What stays after a swap: the median resident memory 2 to 6 seconds after it, once the retired
# generation is gone and before the next harvest grows (a single sample moves by a few MiB with
# what the cache holds at that instant).
def settled(s):
    window = sorted(int(kb) / 1024 for t, kb, _ in lines if s + 2.0 <= float(t) <= s + 6.0)
    return window[len(window) // 2] if window else None
after = [m for m in map(settled, swaps) if m is not None]
if len(cycles) >= 2:
    first, last = max(cycles[0]), max(cycles[-1])
    flat = last <= first * 1.10 and after[-1] <= after[0] * 1.10
    memory = (f"cycle peaks {', '.join(f'{max(c):.0f}' for c in cycles)} MiB; settled after each swap "
              f"{', '.join(f'{m:.0f}' for m in after)} MiB; last vs first peak {last / first:.2f}x")
else:
    flat, memory = False, f"only {len(cycles)} whole refresh cycles sampled"
checks = [
    ("zero errors under load during refreshes", f"{ours['errors']} ({ours['detail']})", ours["errors"] == 0),
    ("refreshes finished during the load (at least 2), none failed",
     f"{refreshes} finished, {failures} failed, {pages:,} upstream requests", refreshes >= 2 and failures == 0),
    ("memory flat: the last refresh cycle peaks at most 10% above the first, and no more is kept after the last swap than after the first (+10%)",
     memory, flat),
]
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
if dirty:
    rev += " with uncommitted changes"
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
nginx_version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[0].split(" [")[0]
row = lambda name, r: (f"| {name} | {r['requests']:,} | {r['rps']:,.0f} | {r['transfer']} | {r['p50']:.2f} "
                       f"| {r['p99']:.2f} | {r['errors']} |")
report = f"""# Load test results

wrk ({wrk_version}; 1 thread, {conns} connections, {duration} s, timeout {timeout} s,
`Accept-Encoding: gzip`, pinned to core 1) requests the {files} files of a generation in turn:
robots.txt, the sitemap and Signmap indexes and every shard, plain (gzip negotiated) and as
`.xml.gz`, after a 10-second warm-up. `oai-bridge serve` (at {rev}, core 0) harvested a {int(records):,}-record repository
in full back to back during the run (a refresh every second, each a full harvest through the
store, swapping a new generation in); nginx ({nginx_version}, `gzip_static`, one worker, core 0)
served the same files from disk, idle, as the peer. Bodies were checked identical before.
Machine: {cpu}, {platform.machine()}, Linux {platform.release()}.

Reproduce with `bash benches/load/run.sh` (about 4 minutes).

| server | requests | req/s | transfer/s | p50 (ms) | p99 (ms) | errors |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
{row("oai-bridge serve, refreshing", ours)}
{row("nginx, idle (peer)", peer)}

Ours vs nginx: **{ours['rps'] / peer['rps']:.2f}x** the requests per second, p99 **{ours['p99'] / peer['p99']:.2f}x**.
Gateway resident memory, sampled five times a second ({len(rss)} samples): {min(rss):.1f} to {max(rss):.1f} MiB;
peak {max(m for _, m in samples):.1f} MiB (VmHWM between samples).

| target | measured | verdict |
| --- | --- | --- |
""" + "\n".join(f"| {name} | {value} | {'pass' if ok else '**FAIL**'} |" for name, value, ok in checks) + "\n"
pathlib.Path("benches/load/RESULTS.md").write_text(report)
print(report)
sys.exit(0 if all(ok for _, _, ok in checks) else 3)
PY
