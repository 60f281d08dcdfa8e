#!/usr/bin/env bash
# Fleet benchmark (issue 22 point 9): one `oai-bridge serve` for 1,000 small repositories, each
# a Static Repository file of its own configured in a file of its own (`include`), with the
# default fleet controls (max_concurrent_refreshes = 4, start_spread_secs = 30). Measures the
# time until every repository is published, the gateway's memory once they are (VmRSS and its
# peak VmHWM, from /proc/PID/status) against the target of 300 MiB, and its CPU while idle over
# IDLE seconds after that (utime + stime from /proc/PID/stat) against the target of 1% of a core.
# Checks every repository's sitemap before measuring. Writes benches/fleet/RESULTS.md (and prints
# it).
#
#   bash benches/fleet/run.sh
#
# Knobs (environment): REPOS (1000), RECORDS (records per repository, 20), IDLE (seconds of the
# idle measurement, 60), STRICT=1 (exit 3 when a target is missed). Loopback only; everything it
# writes stays under target/bench-fleet/.
set -euo pipefail
cd "$(dirname "$0")/../.."

REPOS=${REPOS:-1000}
RECORDS=${RECORDS:-20}
IDLE=${IDLE:-60}
STRICT=${STRICT:-0}
GATEWAY=18820
ADMIN=18821
RSS_TARGET_MIB=300
CPU_TARGET_PCT=1

work=$(pwd)/target/bench-fleet
bin=$work/oai-bridge
# shellcheck source=benches/lib.sh
. benches/lib.sh
# The admin listener on its own port (lib.sh would give it a free one; the script reads it).
export OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$ADMIN

install_missing curl:curl python3:python3

rm -rf "$work"
mkdir -p "$work/repositories.d" "$work/data"
log "building oai-bridge (release)"
timeout 1800 cargo build --release --locked --bin oai-bridge
cp target/release/oai-bridge "$bin"
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ] || commit="$commit + working tree"

log "writing $REPOS repositories of $RECORDS records, one file each"
python3 - "$work" "$REPOS" "$RECORDS" <<'EOF'
import sys
work, repos, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
head = """<?xml version="1.0" encoding="UTF-8"?>
<Repository xmlns="http://www.openarchives.org/OAI/2.0/static-repository"
            xmlns:oai="http://www.openarchives.org/OAI/2.0/">
  <Identify>
    <oai:repositoryName>Journal {j}</oai:repositoryName>
    <oai:baseURL>https://journals.example/{j}/oai</oai:baseURL>
    <oai:protocolVersion>2.0</oai:protocolVersion>
    <oai:adminEmail>editor@journals.example</oai:adminEmail>
    <oai:earliestDatestamp>2020-01-01</oai:earliestDatestamp>
    <oai:deletedRecord>persistent</oai:deletedRecord>
    <oai:granularity>YYYY-MM-DD</oai:granularity>
  </Identify>
  <ListMetadataFormats>
    <oai:metadataFormat>
      <oai:metadataPrefix>oai_dc</oai:metadataPrefix>
      <oai:schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</oai:schema>
      <oai:metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</oai:metadataNamespace>
    </oai:metadataFormat>
  </ListMetadataFormats>
  <ListRecords metadataPrefix="oai_dc">
"""
record = """  <oai:record>
    <oai:header>
      <oai:identifier>oai:journals.example:{j}/{n}</oai:identifier>
      <oai:datestamp>2024-01-{d:02}</oai:datestamp>
    </oai:header>
    <oai:metadata>
      <oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">
        <dc:title>Article {n} of journal {j}</dc:title>
        <dc:creator>Author, An</dc:creator>
        <dc:type>Article</dc:type>
        <dc:identifier>https://journals.example/{j}/article/view/{n}</dc:identifier>
      </oai_dc:dc>
    </oai:metadata>
  </oai:record>
"""
for i in range(repos):
    j = f"j{i:04d}"
    with open(f"{work}/data/{j}.xml", "w") as f:
        f.write(head.format(j=j))
        for n in range(1, records + 1):
            f.write(record.format(j=j, n=n, d=n % 28 + 1))
        f.write("  </ListRecords>\n</Repository>\n")
    with open(f"{work}/repositories.d/{j}.toml", "w") as f:
        f.write(f'[[repository]]\nname = "{j}"\nbase_url = "../data/{j}.xml"\n'
                f'platform = "generic"\nscope = ["https://journals.example/{j}/"]\n')
EOF
cat >"$work/bridge.toml" <<EOF
include = ["repositories.d/*.toml"]
[server]
listen = "127.0.0.1:$GATEWAY"
state_dir = "state"
# [harvest]: the defaults (max_concurrent_refreshes = 4, per_host_concurrency = 1,
# start_spread_secs = 30, refresh_interval_secs = 21600: nothing is due in the idle window).
EOF

log "starting the gateway"
started=$(date +%s.%N)
"$bin" serve --config "$work/bridge.toml" >"$work/gateway.out" 2>"$work/gateway.log" &
pid=$!
pids+=("$pid")
wait_port "$GATEWAY" "$pid" "$work/gateway.log"
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY/readyz")" = 200 ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$work/gateway.log" >&2; log "the gateway exited"; exit 1; }
  sleep 0.2
done
ready=$(date +%s.%N)
publish_secs=$(python3 -c "print(f'{$ready - $started:.1f}')")
log "every repository published after $publish_secs s"

log "checking every repository's sitemap"
urls=0
for i in $(seq 0 $((REPOS - 1))); do
  j=$(printf 'j%04d' "$i")
  for shard in $(curl -sf "http://127.0.0.1:$GATEWAY/$j/sitemap.xml" | grep -o '<loc>[^<]*' | sed 's/<loc>//'); do
    n=$(curl -sf "http://127.0.0.1:$GATEWAY${shard#http://127.0.0.1:$GATEWAY}" | grep -c '<loc>https://journals.example/' || true)
    urls=$((urls + n))
  done
done
[ "$urls" = $((REPOS * RECORDS)) ] || { log "$urls URLs published, expected $((REPOS * RECORDS))"; exit 1; }

status() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# Each thread's context switches, as "tid:count" words (threads come and go: tokio's blocking
# pool ends idle ones, so only threads alive at both ends of the window are compared).
switches() {
  for t in /proc/"$pid"/task/*; do
    awk -v t="${t##*/}" '$1 ~ /ctxt_switches/ { s += $2 } END { printf "%s:%d ", t, s }' "$t/status" 2>/dev/null || true
  done
}
sleep 5 # the last refresh threads end and hand their memory back
rss_kib=$(status VmRSS)
hwm_kib=$(status VmHWM)
threads=$(status Threads)
log "idle for $IDLE s"
t0=$(ticks); s0=$(switches); w0=$(date +%s.%N)
sleep "$IDLE"
t1=$(ticks); s1=$(switches); w1=$(date +%s.%N)
rss_after_kib=$(status VmRSS)
hz=$(getconf CLK_TCK)
idle_ticks=$((t1 - t0))
read -r cpu_pct cpu_bound wakeups rss_mib hwm_mib rss_after_mib <<<"$(python3 -c "
wall = $w1 - $w0
before = dict(w.split(':') for w in '$s0'.split())
after = dict(w.split(':') for w in '$s1'.split())
woken = sum(int(after[t]) - int(before[t]) for t in after if t in before)
print(f'{$idle_ticks / $hz / wall * 100:.3f}', f'{(max($idle_ticks, 1)) / $hz / wall * 100:.3f}',
      f'{woken / wall:.1f}', f'{$rss_kib / 1024:.1f}', f'{$hwm_kib / 1024:.1f}',
      f'{$rss_after_kib / 1024:.1f}')")"
refreshes=$(grep -c 'refresh done' "$work/gateway.log" || true)
verdict() { python3 -c "print('pass' if $1 <= $2 else 'MISSED')"; }
ratio() { python3 -c "print(f'{$1 / $2:.3f}x')"; }

cat >benches/fleet/RESULTS.md <<EOF
# Fleet benchmark results

One \`oai-bridge serve\` (at $commit, release build) for $REPOS repositories of $RECORDS records
each: a Static Repository file and a \`repositories.d/*.toml\` file (\`include\`) per
repository, with the default fleet controls (\`max_concurrent_refreshes = 4\`,
\`start_spread_secs = 30\`). Every repository's sitemap index and shards were fetched and counted
($urls URLs) before measuring. Memory is the process's \`VmRSS\` from \`/proc/PID/status\` once
every repository is published (5 s after the last), and \`VmHWM\`, its peak since the start;
idle CPU is \`utime + stime\` from \`/proc/PID/stat\` over $IDLE s after that, with every
repository scheduled (no refresh is due for 6 hours): what the schedules, timers and listeners
cost when nothing happens: each repository's schedule is one sleeping tokio timer, and nothing
polls. Wakeups are the voluntary and involuntary context switches of the process's threads
(those alive through the whole window).

Machine: $(uname -m), $(nproc) cores, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end.

Reproduce with:

\`\`\`sh
bash benches/fleet/run.sh
\`\`\`

| figure | value |
| --- | ---: |
| repositories published | $REPOS ($refreshes refreshes) |
| time from start to every repository published | $publish_secs s |
| threads | $threads |
| VmRSS, all published | $rss_mib MiB |
| VmHWM (peak) | $hwm_mib MiB |
| VmRSS after $IDLE s idle | $rss_after_mib MiB |
| CPU while idle | $cpu_pct% of a core ($idle_ticks clock ticks of $((1000 / hz)) ms in $IDLE s; one tick would be $cpu_bound%) |
| wakeups while idle | $wakeups a second |

| target | figure | ratio to the target | verdict |
| --- | ---: | ---: | --- |
| under $RSS_TARGET_MIB MiB RSS with every repository published | $hwm_mib MiB (peak) | $(ratio "$hwm_mib" "$RSS_TARGET_MIB") | $(verdict "$hwm_mib" "$RSS_TARGET_MIB") |
| idle scheduler under $CPU_TARGET_PCT% of a core | $cpu_pct% (the whole process; at most $cpu_bound%) | $(ratio "$cpu_bound" "$CPU_TARGET_PCT") at most | $(verdict "$cpu_bound" "$CPU_TARGET_PCT") |
EOF
cat benches/fleet/RESULTS.md
if [ "$STRICT" = 1 ]; then
  [ "$(verdict "$hwm_mib" "$RSS_TARGET_MIB")" = pass ] && [ "$(verdict "$cpu_bound" "$CPU_TARGET_PCT")" = pass ] || exit 3
fi
