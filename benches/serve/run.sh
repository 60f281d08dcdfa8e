#!/usr/bin/env bash
# Serving benchmark: wrk against `oai-bridge serve` and, in the same run, against nginx serving the
# same bytes from disk (gzip_static), for /robots.txt, a 50,000-URL shard with gzip negotiated, and
# the same shard as .xml.gz; once idle and once while the gateway refreshes a 1,000,000-record
# repository back to back. Reports requests/s and p99 latency of both, as ratios, against the
# targets (at least 1.0x nginx's requests/s, p99 at most 1.2x nginx's). Writes
# benches/serve/RESULTS.md (and prints it).
#
#   bash benches/serve/run.sh
#
# Knobs (environment): DURATION (seconds per wrk run, 10), CONNECTIONS (wrk connections, 32),
# BIG_RECORDS (1000000), STRICT=1 (exit 3 when a target is missed).
# The servers run on core 0, wrk and the upstreams on core 1 (taskset). Loopback only; it installs
# wrk and nginx with apt-get when missing; everything it writes stays under target/bench-serve/.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
BIG_RECORDS=${BIG_RECORDS:-1000000}
STRICT=${STRICT:-0}
SHARD_RECORDS=40000 # about 52,500 URLs: the first shard holds exactly 50,000
UP_SMALL=18801
UP_BIG=18802
GATEWAY=18810
NGINX=18811

work=$(pwd)/target/bench-serve
bin=$work/oai-bridge
server_bin=target/bench-server/release/oai-bench-server
log() { printf '== %s\n' "$*" >&2; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v taskset >/dev/null || need+=(util-linux)
if ((${#need[@]})); then
  log "installing ${need[*]}"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

rm -rf "$work"
mkdir -p "$work/www/r" "$work/state"
log "building oai-bridge (release) and the benchmark upstream"
timeout 1800 cargo build --release --locked --bin oai-bridge
cp target/release/oai-bridge "$bin"
timeout 900 cargo build --release --locked --manifest-path benches/harvest/server/Cargo.toml --target-dir target/bench-server

wait_port() { # PORT PID LOG
  local waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; log "process for port $1 exited"; exit 1; }
    ((waited++ < 3000)) || { log "port $1 not listening after 300 s"; exit 1; }
    sleep 0.1
  done
}
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
$1
EOF
  taskset -c 0 "$bin" serve --config "$work/bridge.toml" >"$work/gateway.out" 2>"$work/gateway.log" &
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
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon on;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { application/xml xml; application/gzip gz; text/plain txt; }
  gzip_static on;
  gzip_vary on;
  client_body_temp_path $work/nginx-tmp;
  proxy_temp_path $work/nginx-tmp;
  fastcgi_temp_path $work/nginx-tmp;
  uwsgi_temp_path $work/nginx-tmp;
  scgi_temp_path $work/nginx-tmp;
  server { listen 127.0.0.1:$NGINX; root $work/www; }
}
EOF
mkdir -p "$work/nginx-tmp"
taskset -c 0 "$nginx_bin" -c "$work/nginx.conf" -e "$work/nginx-error.log"
wait_port "$NGINX" $$ /dev/null

# Both must answer the same bytes, or the comparison means nothing.
for path in robots.txt r/sitemap-1.xml r/sitemap-1.xml.gz; do
  for enc in identity gzip; do
    a=$(curl -s -H "Accept-Encoding: $enc" "http://127.0.0.1:$GATEWAY/$path" | sha256sum)
    b=$(curl -s -H "Accept-Encoding: $enc" "http://127.0.0.1:$NGINX/$path" | sha256sum)
    [ "$a" = "$b" ] || { log "$path ($enc) differs between the gateway and nginx"; exit 1; }
  done
done
shard_bytes=$(stat -c %s "$work/www/r/sitemap-1.xml")
gz_bytes=$(stat -c %s "$work/www/r/sitemap-1.xml.gz")

# bench NAME PORT PATH: wrk on core 1 into $work/NAME.wrk.
bench() {
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -H 'Accept-Encoding: gzip' \
    "http://127.0.0.1:$2/$3" >"$work/$1.wrk" 2>&1 || { cat "$work/$1.wrk" >&2; exit 1; }
  grep -E 'Requests/sec|99%' "$work/$1.wrk" | tr -s ' ' | sed "s/^/  $1: /" >&2
}
run_all() { # PHASE
  for target in robots:robots.txt shard:r/sitemap-1.xml gz:r/sitemap-1.xml.gz; do
    name=${target%%:*} path=${target#*:}
    bench "$1-$name-nginx" "$NGINX" "$path"
    bench "$1-$name-ours" "$GATEWAY" "$path"
  done
}

log "idle: wrk, $CONNECTIONS connections, ${DURATION} s each"
run_all idle

log "during refreshes of a $BIG_RECORDS-record repository"
stop_gateway
upstream "$BIG_RECORDS" "$UP_BIG"
start_gateway "[[repository]]
name = \"big\"
base_url = \"http://127.0.0.1:$UP_BIG/oai/request\"
refresh_interval_secs = 1"
# Wait until the big repository's first refresh has started.
sleep 1
metric() { curl -s "http://127.0.0.1:$GATEWAY/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
before=$(metric 'oai_bridge_upstream_requests_total{repository="big"}')
run_all refresh
after=$(metric 'oai_bridge_upstream_requests_total{repository="big"}')
harvests=$(metric 'oai_bridge_harvests_total{repository="big",outcome="success"}')
refresh_pages=$(( ${after:-0} - ${before:-0} ))
log "the big repository: $refresh_pages upstream requests during the runs, ${harvests:-0} refreshes done"
[ "$refresh_pages" -gt 0 ] || { log "no refresh ran during the measurement"; exit 1; }

python3 - "$work" "$DURATION" "$CONNECTIONS" "$shard_bytes" "$gz_bytes" "$BIG_RECORDS" "$refresh_pages" "${harvests:-0}" "$STRICT" <<'PY'
import re, sys, pathlib, subprocess, platform
work, duration, conns, shard_bytes, gz_bytes, big, pages, harvests, strict = sys.argv[1:]
work = pathlib.Path(work)

def parse(name):
    text = (work / f"{name}.wrk").read_text()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", text).groups()
    p99 = float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    socket = re.search(r"Socket errors: (.*)", text)
    return rps, p99, (int(errors.group(1)) if errors else 0), (socket.group(1) if socket else "")

labels = {
    "robots": "/robots.txt",
    "shard": f"50,000-URL shard, gzip negotiated ({int(gz_bytes):,} bytes on the wire, {int(shard_bytes):,} plain)",
    "gz": "the same shard as .xml.gz",
}
rows, verdicts, failed = [], [], False
for phase, title in (("idle", "idle"), ("refresh", f"during refreshes of {int(big):,} records")):
    for key, label in labels.items():
        n_rps, n_p99, n_err, n_sock = parse(f"{phase}-{key}-nginx")
        o_rps, o_p99, o_err, o_sock = parse(f"{phase}-{key}-ours")
        r_rps, r_p99 = o_rps / n_rps, o_p99 / n_p99
        rows.append(f"| {title} | {label} | {o_rps:,.0f} | {n_rps:,.0f} | **{r_rps:.2f}x** | {o_p99:.2f} | {n_p99:.2f} | **{r_p99:.2f}x** |")
        ok_rps, ok_p99 = r_rps >= 1.0, r_p99 <= 1.2
        failed |= not (ok_rps and ok_p99)
        verdicts.append(f"| {title}: {label} | {r_rps:.2f}x (target >= 1.0x) {'pass' if ok_rps else '**FAIL**'} | {r_p99:.2f}x (target <= 1.2x) {'pass' if ok_p99 else '**FAIL**'} |")
        if n_err or o_err or n_sock or o_sock:
            rows.append(f"| | errors | {o_err} non-2xx {o_sock} | {n_err} non-2xx {n_sock} | | | | |")

nginx_version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[0]
rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
report = f"""# Serving benchmark results

`oai-bridge serve` (at {rev}) and nginx serving the same bytes from disk (`gzip_static on`,
`sendfile on`, one worker), each pinned to core 0; wrk (1 thread, {conns} connections, {duration} s
a run, `Accept-Encoding: gzip`) pinned to core 1. Bodies were checked identical before measuring.
The second half ran while the gateway refreshed a {int(big):,}-record repository back to back
(refresh_interval_secs = 1): {pages} upstream requests during the runs, {harvests} refreshes finished.

Machine: {cpu}, {platform.machine()}, Linux {platform.release()}; {nginx_version}; {wrk_version}.

Reproduce with:

```sh
bash benches/serve/run.sh
```

| phase | what | ours req/s | nginx req/s | ours vs nginx | ours p99 (ms) | nginx p99 (ms) | p99 ours vs nginx |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |
""" + "\n".join(rows) + """

| target | requests/s | p99 |
| --- | --- | --- |
""" + "\n".join(verdicts) + "\n"
(pathlib.Path("benches/serve/RESULTS.md")).write_text(report)
print(report)
sys.exit(3 if failed and strict == "1" else 0)
PY
