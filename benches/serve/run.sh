#!/usr/bin/env bash
# Serving benchmark: wrk against `oai-bridge serve` and, in the same run, against nginx serving the
# same bytes from disk (gzip_static), for /robots.txt, a 50,000-URL shard with gzip negotiated, the
# same shard as .xml.gz, a landing page's linkset (`/r/linkset?url=`, Signposting Level 2; nginx
# serves its JSON from a file) and its Level 1 answer (`/r/signposting?url=`, 204 with a `Link`
# header; nginx answers the same header from its configuration); once idle and once while the gateway refreshes a 1,000,000-record
# repository back to back; and a third time from a gateway of a fleet (issue 23): a second gateway
# sharing a PostgreSQL state and a bucket with the first, which serves the generation the first
# made (fetched from the bucket) and polls the shared state meanwhile. Reports requests/s and p99
# latency of both, as ratios, against the targets (at least 1.0x nginx's requests/s, p99 at most
# 1.2x nginx's). Writes benches/serve/RESULTS.md (and prints it).
#
#   bash benches/serve/run.sh
#
# Knobs (environment): DURATION (seconds per wrk run, 8), CONNECTIONS (wrk connections, 32),
# ROUNDS (saturation runs per file and server, 5; the median counts),
# BIG_RECORDS (1000000), STRICT=1 (exit 3 when a target is missed), PHASES (which of "idle refresh
# shared" to run, all by default), TARGETS (which of "robots shard gz linkset signposting", all).
# The servers run on core 0, wrk, the upstreams and the fleet's other gateway and PostgreSQL on
# core 1 (taskset). Loopback only; it installs wrk, nginx and PostgreSQL with apt-get when missing;
# everything it writes stays under target/bench-serve/ (and PostgreSQL's temporary folder,
# removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-5}
BIG_RECORDS=${BIG_RECORDS:-1000000}
STRICT=${STRICT:-0}
PHASES=${PHASES:-idle refresh shared}
TARGETS=${TARGETS:-robots shard gz linkset signposting}
wants() { [[ " $PHASES " == *" $1 "* ]]; }
SHARD_RECORDS=40000 # about 52,500 URLs: the first shard holds exactly 50,000
UP_SMALL=18801
UP_BIG=18802
GATEWAY=18810
NGINX=18811
LEADER=18812 # the fleet's gateway that refreshes
ADMIN=18813 # the measured gateway's admin listener (/metrics)

work=$(pwd)/target/bench-serve
bin=$work/oai-bridge
server_bin=target/bench-server/release/oai-bench-server
# shellcheck source=benches/lib.sh
. benches/lib.sh

install_missing wrk:wrk nginx:nginx-light taskset:util-linux /usr/bin/time:time \
  /usr/lib/postgresql/15/bin/initdb:postgresql-15
pg_dir=
stop_all() { cleanup; [ -z "$pg_dir" ] || .ci/postgres.sh stop "$pg_dir"; }
trap stop_all EXIT INT TERM

rm -rf "$work"
mkdir -p "$work/www/r" "$work/state"
build_binaries

upstream() { # RECORDS PORT
  taskset -c 1 "$server_bin" --records "$1" --page-size 500 --port "$2" 2>"$work/upstream-$2.log" &
  pids+=($!)
  wait_port "$2" $! "$work/upstream-$2.log"
}

# The gateway on core 0. $1: extra [[repository]] text.
gateway_pid=
start_gateway() {
  cat >"$work/bridge.toml" <<EOF
[server]
listen = "127.0.0.1:$GATEWAY"
state_dir = "$work/state"
[[repository]]
name = "r"
base_url = "http://127.0.0.1:$UP_SMALL/oai/request"
gzip = true
signmap = true
$1
EOF
  OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$ADMIN taskset -c 0 "$bin" serve --config "$work/bridge.toml" >"$work/gateway.out" 2>"$work/gateway.log" &
  gateway_pid=$!
  pids+=("$gateway_pid")
  wait_port "$GATEWAY" "$gateway_pid" "$work/gateway.log"
  local waited=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY/r/sitemap.xml")" = 200 ]; do
    ((waited++ < 3000)) || { log "the gateway did not serve r within 300 s"; cat "$work/gateway.log" >&2; exit 1; }
    sleep 0.1
  done
}
stop_gateway() { kill "$gateway_pid"; wait "$gateway_pid" 2>/dev/null || true; }

log "upstream with $SHARD_RECORDS records (the 50,000-URL shard)"
upstream "$SHARD_RECORDS" "$UP_SMALL"
start_gateway ""
urls=$(curl -s "http://127.0.0.1:$GATEWAY/r/sitemap-1.xml" | grep -o '<loc>' | wc -l)
[ "$urls" = 50000 ] || { log "shard 1 has $urls URLs, expected 50000"; exit 1; }

# nginx serves the same bytes: robots.txt, the shard plain and gzipped (gzip_static).
curl -s -o "$work/www/robots.txt" "http://127.0.0.1:$GATEWAY/robots.txt"
curl -s -o "$work/www/r/sitemap-1.xml" "http://127.0.0.1:$GATEWAY/r/sitemap-1.xml"
curl -s -o "$work/www/r/sitemap-1.xml.gz" "http://127.0.0.1:$GATEWAY/r/sitemap-1.xml.gz"
# The first landing page of the Signmap: its linkset, a file for nginx (which ignores the query),
# and its Level 1 header, which nginx adds to a 204 of its own.
first_loc() { grep -o '<loc>[^<]*</loc>' | sed -e 's/<[^>]*>//g' -e 's/&amp;/\&/g' | sed -n 1p; }
signmap_shard=$(curl -s "http://127.0.0.1:$GATEWAY/r/signmap.xml" | first_loc)
landing=$(curl -s "http://127.0.0.1:$GATEWAY/r/${signmap_shard##*/}" | first_loc)
[ -n "$landing" ] || { log "no landing page in the Signmap"; exit 1; }
landing_q=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$landing")
linkset_path="r/linkset?url=$landing_q"
signposting_path="r/signposting?url=$landing_q"
curl -sf -o "$work/www/r/linkset" "http://127.0.0.1:$GATEWAY/$linkset_path"
link_of() { curl -s -D - -o /dev/null "$1" | sed -n 's/^[Ll]ink: //p' | tr -d '\r'; }
link=$(link_of "http://127.0.0.1:$GATEWAY/$signposting_path")
[ -n "$link" ] && [[ $link != *"'"* ]] || { log "no Link header (or one with a quote) for $landing: $link"; exit 1; }
start_nginx_peer "$NGINX" "location = /r/signposting { add_header Link '$link'; return 204; }"

# Both must answer the same bytes, or the comparison means nothing.
same_bytes() {
  for path in robots.txt r/sitemap-1.xml r/sitemap-1.xml.gz; do
    for enc in identity gzip; do
      a=$(curl -s -H "Accept-Encoding: $enc" "http://127.0.0.1:$GATEWAY/$path" | sha256sum)
      b=$(curl -s -H "Accept-Encoding: $enc" "http://127.0.0.1:$NGINX/$path" | sha256sum)
      [ "$a" = "$b" ] || { log "$path ($enc) differs between the gateway and nginx"; exit 1; }
    done
  done
  a=$(curl -s "http://127.0.0.1:$GATEWAY/$linkset_path" | sha256sum)
  b=$(curl -s "http://127.0.0.1:$NGINX/$linkset_path" | sha256sum)
  [ "$a" = "$b" ] || { log "the linkset differs between the gateway and nginx"; exit 1; }
  [ "$(link_of "http://127.0.0.1:$GATEWAY/$signposting_path")" = "$(link_of "http://127.0.0.1:$NGINX/$signposting_path")" ] ||
    { log "the Level 1 Link header differs between the gateway and nginx"; exit 1; }
}
same_bytes
shard_bytes=$(stat -c %s "$work/www/r/sitemap-1.xml")
gz_bytes=$(stat -c %s "$work/www/r/sitemap-1.xml.gz")

# Two measurements per file and server, wrk on core 1 with `Accept-Encoding: gzip`:
# - saturation: as fast as wrk can go, ROUNDS runs alternating nginx and ours (the median is
#   reported), under GNU time so the client's own CPU use shows when wrk, not the server, is the
#   limit;
# - fixed load: every connection waits a fixed delay between requests (wrk's Lua `delay()`), the
#   same for both servers, set to about half the slower server's saturation rate. The p99 compared
#   is this one: at saturation, a faster server mostly measures the client's queueing.
cat >"$work/delay.lua" <<'LUA'
local ms = tonumber(os.getenv("DELAY_MS"))
function delay() return ms end
LUA
wrk_run() { # FILE PORT PATH [DELAY_MS]
  local script=()
  [ -n "${4:-}" ] && script=(-s "$work/delay.lua")
  DELAY_MS=${4:-0} taskset -c 1 /usr/bin/time -f '%P' -o "$1.cpu" \
    wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -H 'Accept-Encoding: gzip' "${script[@]}" \
    "http://127.0.0.1:$2/$3" >"$1" 2>&1 || { cat "$1" >&2; exit 1; }
}
rps_of() { awk '/Requests\/sec/ { print $2 }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
run_all() { # PHASE
  for target in robots:robots.txt shard:r/sitemap-1.xml gz:r/sitemap-1.xml.gz \
    "linkset:$linkset_path" "signposting:$signposting_path"; do
    local name=${target%%:*} path=${target#*:} i
    [[ " $TARGETS " == *" $name "* ]] || continue
    for i in $(seq "$ROUNDS"); do
      wrk_run "$work/$1-$name-nginx-sat$i.wrk" "$NGINX" "$path"
      wrk_run "$work/$1-$name-ours-sat$i.wrk" "$GATEWAY" "$path"
    done
    local n o slower delay
    n=$(for i in $(seq "$ROUNDS"); do rps_of "$work/$1-$name-nginx-sat$i.wrk"; done | median)
    o=$(for i in $(seq "$ROUNDS"); do rps_of "$work/$1-$name-ours-sat$i.wrk"; done | median)
    slower=$(printf '%s\n%s\n' "$n" "$o" | sort -g | sed -n 1p)
    delay=$(awk -v c="$CONNECTIONS" -v r="$slower" 'BEGIN { d = int(c * 1000 / (r / 2) + 0.5); print (d < 1 ? 1 : d) }')
    echo "$delay" >"$work/$1-$name.delay"
    wrk_run "$work/$1-$name-nginx-fixed.wrk" "$NGINX" "$path" "$delay"
    wrk_run "$work/$1-$name-ours-fixed.wrk" "$GATEWAY" "$path" "$delay"
    log "$1 $name: saturation nginx $n, ours $o req/s; fixed load with ${delay} ms between requests"
  done
}

load_at_start=$(cut -d' ' -f1 /proc/loadavg)
if wants idle; then
  log "idle: wrk, $CONNECTIONS connections, ${DURATION} s a run"
  run_all idle
fi

# (The phases' blocks are not indented: their configurations are here-documents.)
refresh_pages=0 harvests=0
if wants refresh; then
log "during refreshes of a $BIG_RECORDS-record repository"
stop_gateway
upstream "$BIG_RECORDS" "$UP_BIG"
start_gateway "[[repository]]
name = \"big\"
base_url = \"http://127.0.0.1:$UP_BIG/oai/request\"
refresh_interval_secs = 1"
# Wait until the big repository's first refresh has started.
sleep 1
# metric SERIES: the sum of the measured gateway's series that start with SERIES (every status of
# an upstream's answers, say).
metric() {
  curl -s "http://127.0.0.1:$ADMIN/metrics" | awk -v m="$1" 'index($1, m) == 1 { s += $2 } END { print s + 0 }'
}
before=$(metric 'oai_bridge_upstream_requests_total{repository="big",')
run_all refresh
after=$(metric 'oai_bridge_upstream_requests_total{repository="big",')
harvests=$(metric 'oai_bridge_harvests_total{repository="big",outcome="success"}')
refresh_pages=$(( ${after:-0} - ${before:-0} ))
log "the big repository: $refresh_pages upstream requests during the runs, ${harvests:-0} refreshes done"
[ "$refresh_pages" -gt 0 ] || { log "no refresh ran during the measurement"; exit 1; }
fi

if wants shared; then
log "a fleet: the measured gateway follows the one that refreshes, through PostgreSQL and a bucket"
stop_gateway
pg_url=$(.ci/postgres.sh 2>"$work/pg-dir")
pg_dir=$(cat "$work/pg-dir")
# fleet_gateway NAME PORT CORE ADMIN_PORT: a gateway of the fleet; both share the state, the
# bucket and the public URL (the measured gateway's), so that they publish the same bytes.
fleet_gateway() {
  cat >"$work/$1.toml" <<EOF
[server]
listen = "127.0.0.1:$2"
state_dir = "$work/$1-state"
public_url = "http://127.0.0.1:$GATEWAY/"
publish_url = "file://$work/bucket/"
[state]
url = "$pg_url"
[[repository]]
name = "r"
base_url = "http://127.0.0.1:$UP_SMALL/oai/request"
gzip = true
signmap = true
EOF
  OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$4 taskset -c "$3" "$bin" serve --config "$work/$1.toml" >"$work/$1.out" 2>"$work/$1.log" &
  gateway_pid=$!
  pids+=("$gateway_pid")
  wait_port "$2" "$gateway_pid" "$work/$1.log"
  local waited=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$2/r/sitemap.xml")" = 200 ]; do
    ((waited++ < 3000)) || { log "$1 did not serve r within 300 s"; cat "$work/$1.log" >&2; exit 1; }
    sleep 0.1
  done
}
fleet_gateway leader "$LEADER" 1 0
fleet_gateway follower "$GATEWAY" 0 "$ADMIN"
grep -q "serving the generation another gateway of the fleet made" "$work/follower.log" ||
  { log "the measured gateway did not follow the leader"; cat "$work/follower.log" >&2; exit 1; }
follower_requests=$(metric 'oai_bridge_upstream_requests_total{repository="r",')
[ "${follower_requests:-0}" = 0 ] ||
  { log "the measured gateway asked the upstream itself ($follower_requests requests)"; exit 1; }
# nginx serves the fleet's bytes (its robots.txt names the fleet's public URL).
for path in robots.txt r/sitemap-1.xml r/sitemap-1.xml.gz; do
  curl -s -o "$work/www/$path" "http://127.0.0.1:$LEADER/$path"
done
curl -sf -o "$work/www/r/linkset" "http://127.0.0.1:$LEADER/$linkset_path"
same_bytes
run_all shared
fi

linkset_bytes=$(stat -c %s "$work/www/r/linkset")
python3 - "$work" "$DURATION" "$CONNECTIONS" "$ROUNDS" "$shard_bytes" "$gz_bytes" "$BIG_RECORDS" "$refresh_pages" "${harvests:-0}" "$STRICT" \
  "$PHASES" "$TARGETS" "$linkset_bytes" "${#link}" "$load_at_start" <<'PY'
import re, sys, pathlib, statistics, subprocess, platform
(work, duration, conns, rounds, shard_bytes, gz_bytes, big, pages, harvests, strict, phases,
 targets, linkset_bytes, link_bytes, load_at_start) = sys.argv[1:]
phases, targets = phases.split(), targets.split()
work, rounds = pathlib.Path(work), int(rounds)

def parse(name):
    text = (work / f"{name}.wrk").read_text()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", text).groups()
    p99 = float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: (.*)", text)
    if bad or sock:
        sys.exit(f"{name}: errors: {bad.group(0) if bad else ''} {sock.group(0) if sock else ''}")
    cpu = (work / f"{name}.wrk.cpu").read_text().strip().rstrip("%")
    return rps, p99, float(cpu)

def saturation(prefix):
    runs = [parse(f"{prefix}-sat{i}") for i in range(1, rounds + 1)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            statistics.median(r[2] for r in runs))

labels = {
    "robots": "/robots.txt",
    "shard": f"50,000-URL shard, gzip negotiated ({int(gz_bytes):,} bytes on the wire)",
    "gz": "the same shard as .xml.gz",
    "linkset": f"a landing page's linkset ({int(linkset_bytes):,} bytes of JSON)",
    "signposting": f"its Level 1 answer (204, a {int(link_bytes):,}-byte `Link`)",
}
rows, verdicts, failed = [], [], False
# Signposting's target (issue 32 point 6): a linkset or Level 1 answer costs no more than a shard
# answer, i.e. at least the shard's req/s and at most its p99 (each ours, in the same run).
against_shard = []
titles = {"idle": "idle", "refresh": f"refreshing {int(big):,} records", "shared": "a fleet's follower"}
for phase, title in ((p, titles[p]) for p in titles if p in phases):
    for key, label in ((k, l) for k, l in labels.items() if k in targets):
        n_rps, n_sat99, n_cpu = saturation(f"{phase}-{key}-nginx")
        o_rps, o_sat99, o_cpu = saturation(f"{phase}-{key}-ours")
        delay = (work / f"{phase}-{key}.delay").read_text().strip()
        n_fixed_rps, n_p99, _ = parse(f"{phase}-{key}-nginx-fixed")
        o_fixed_rps, o_p99, _ = parse(f"{phase}-{key}-ours-fixed")
        r_rps, r_p99 = o_rps / n_rps, o_p99 / n_p99
        rows.append(
            f"| {title} | {label} | {o_rps:,.0f} | {n_rps:,.0f} | **{r_rps:.2f}x** | {o_cpu:.0f}% / {n_cpu:.0f}% "
            f"| {o_sat99:.2f} / {n_sat99:.2f} | {o_fixed_rps:,.0f} / {n_fixed_rps:,.0f} | {o_p99:.2f} | {n_p99:.2f} | **{r_p99:.2f}x** |")
        ok_rps, ok_p99 = r_rps >= 1.0, r_p99 <= 1.2
        failed |= not (ok_rps and ok_p99)
        verdicts.append(f"| {title}: {label} | {r_rps:.2f}x {'pass' if ok_rps else '**FAIL**'} | {r_p99:.2f}x {'pass' if ok_p99 else '**FAIL**'} |")
        if key in ("linkset", "signposting") and "shard" in targets:
            s_rps = saturation(f"{phase}-shard-ours")[0]
            s_p99 = parse(f"{phase}-shard-ours-fixed")[1]
            ok = o_rps >= s_rps and o_p99 <= s_p99
            failed |= not ok
            against_shard.append(
                f"| {title}: {label} | {o_rps / s_rps:.2f}x | {o_p99:.2f} / {s_p99:.2f} | {'pass' if ok else '**FAIL**'} |")

nginx_version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[0].split(" [")[0]
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
load = open("/proc/loadavg").read().split()[0]
report = f"""# Serving benchmark results

`oai-bridge serve` (at {rev}) and nginx serving the same bytes from disk (`gzip_static on`,
`sendfile on`, one worker), each pinned to core 0; wrk ({wrk_version}; 1 thread, {conns}
connections, {duration} s a run, `Accept-Encoding: gzip`) pinned to core 1. Bodies were checked
identical before measuring. The second half ran while the gateway refreshed a {int(big):,}-record
repository back to back (refresh_interval_secs = 1; {pages} upstream requests during the runs,
{harvests} refreshes finished). The third ran against a gateway of a fleet (`[state] url` on a
PostgreSQL 15 on core 1, `publish_url` a `file://` bucket) serving the generation that the fleet's
other gateway made, fetched from the bucket; it made no upstream request and polled the shared
state every 2 s meanwhile.

- **req/s** at saturation, the median of {rounds} runs alternating the two servers; **client CPU**
  is wrk's share of its core: near 100% means the client, not the server, was the limit.
- **p99 (ms)** compared under a fixed load: every connection waits the same delay between
  requests, for both servers, about half the slower server's saturation rate. The p99 at
  saturation is shown too, but there a server that answers faster mostly measures the client's own
  queueing.

Machine: {cpu}, {platform.machine()}, Linux {platform.release()}, load average {load_at_start} at
the start and {load} at the end; {nginx_version}. Phases run: {", ".join(phases)}; targets:
{", ".join(targets)}.

Reproduce with:

```sh
bash benches/serve/run.sh
```

| phase | what | ours req/s | nginx req/s | req/s ours vs nginx | client CPU ours / nginx | p99 at saturation ours / nginx | fixed-load req/s ours / nginx | ours p99 (ms) | nginx p99 (ms) | p99 ours vs nginx |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
""" + "\n".join(rows) + """

| target | at least 1.0x nginx's req/s | p99 at most 1.2x nginx's |
| --- | --- | --- |
""" + "\n".join(verdicts) + "\n"
if against_shard:
    report += """
Signposting against the shard (ours, same run): a linkset or Level 1 answer costs no more than a
shard answer.

| answer | req/s vs the shard's | fixed-load p99 (ms) it / the shard | verdict |
| --- | ---: | ---: | --- |
""" + "\n".join(against_shard) + "\n"
(pathlib.Path("benches/serve/RESULTS.md")).write_text(report)
print(report)
sys.exit(3 if failed and strict == "1" else 0)
PY
