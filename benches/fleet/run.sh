#!/usr/bin/env bash
# Fleet benchmark (issue 22 point 9, issue 30 point 6): one `oai-bridge serve` for a fleet of
# repositories of spread sizes, run at each size of SIZES (1,000 and 10,000) in one run so that
# the growth from one to the next is measured under the same load. Each repository is a Static
# Repository file of its own configured in a file of its own (`include`), with the default fleet
# controls (max_concurrent_refreshes = 4, start_spread_secs = 30). Record counts: lognormal
# around MEDIAN with SIGMA (most repositories small, a long tail), from 10 to MAX_RECORDS, and
# one of LARGE_RECORDS every LARGE_EVERY repositories; seeded, so the first thousand of ten
# thousand are the thousand of the smaller run.
#
# At each size it measures: the time from start to every repository published; the gateway's
# memory then (VmRSS, VmHWM from /proc/PID/status) and its CPU while idle over IDLE seconds
# (utime + stime from /proc/PID/stat); the status page's answer time and size (the first page, a
# search by name, the problems view); /metrics' answer time, size and samples with the default
# bound (metrics_repository_series) and unbounded; a reload (SIGHUP, until the log says it is
# done); and a restart with every generation persisted: from the process's start to listening,
# and to /readyz answering 200. Every repository's sitemap is fetched and its URLs counted
# before measuring. Writes benches/fleet/RESULTS.md (and prints it).
#
#   bash benches/fleet/run.sh
#
# Knobs (environment): SIZES ("1000 10000"), MEDIAN (30), SIGMA (1.8), MAX_RECORDS (100000),
# LARGE_EVERY (5000), LARGE_RECORDS (250000), IDLE (seconds of the idle measurement, 60),
# ROUNDS (requests per timed page, the median reported; 5), STRICT=1 (exit 3 when the memory or
# idle CPU target is missed at a size). Loopback only; everything it writes stays under
# target/bench-fleet/.
set -euo pipefail
cd "$(dirname "$0")/../.."

SIZES=${SIZES:-1000 10000}
MEDIAN=${MEDIAN:-30}
SIGMA=${SIGMA:-1.8}
MAX_RECORDS=${MAX_RECORDS:-100000}
LARGE_EVERY=${LARGE_EVERY:-5000}
LARGE_RECORDS=${LARGE_RECORDS:-250000}
IDLE=${IDLE:-60}
ROUNDS=${ROUNDS:-5}
STRICT=${STRICT:-0}
GATEWAY=18820
ADMIN=18821
RSS_TARGET_MIB=300
CPU_TARGET_PCT=1

work=$(pwd)/target/bench-fleet
bin=$work/oai-bridge
helper=$(pwd)/benches/fleet/fleet.py
# shellcheck source=benches/lib.sh
. benches/lib.sh
# The admin listener on its own port (lib.sh would give it a free one; the script reads it).
export OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$ADMIN

install_missing curl:curl python3:python3

rm -rf "$work/n"*
mkdir -p "$work/data"
log "building oai-bridge (release)"
timeout 1800 cargo build --release --locked --bin oai-bridge
cp target/release/oai-bridge "$bin"
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ] || commit="$commit + working tree"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }

# start_gateway DIR: starts the gateway of DIR; sets pid, and listening and ready (seconds from
# the start to the admin port open, and to /readyz 200).
start_gateway() {
  local dir=$1 t0
  t0=$(now)
  "$bin" serve --config "$dir/bridge.toml" >>"$dir/gateway.out" 2>>"$dir/gateway.log" &
  pid=$!
  pids+=("$pid")
  until curl -s -o /dev/null "http://127.0.0.1:$ADMIN/healthz"; do
    kill -0 "$pid" 2>/dev/null || { tail "$dir/gateway.log" >&2; log "the gateway exited"; exit 1; }
    sleep 0.02
  done
  listening=$(secs "$t0" "$(now)")
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY/readyz")" = 200 ]; do
    kill -0 "$pid" 2>/dev/null || { tail "$dir/gateway.log" >&2; log "the gateway exited"; exit 1; }
    sleep 0.05
  done
  ready=$(secs "$t0" "$(now)")
}
stop_gateway() {
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}
status() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
mib() { python3 -c "print(f'{$1 / 1024:.1f}')"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# timed PATH: "median-seconds bytes samples" of GET PATH on the admin listener.
timed() { python3 "$helper" time "$ADMIN" "$1" "$ROUNDS"; }
# config DIR BOUND: DIR's bridge.toml, with metrics_repository_series = BOUND (empty: default).
config() {
  {
    echo 'include = ["repositories.d/*.toml"]'
    echo '[server]'
    echo "listen = \"127.0.0.1:$GATEWAY\""
    echo 'state_dir = "state"'
    [ -z "$2" ] || echo "metrics_repository_series = $2"
    echo '# [harvest]: the defaults (max_concurrent_refreshes = 4, per_host_concurrency = 1,'
    echo '# start_spread_secs = 30, refresh_interval_secs = 21600: nothing is due meanwhile), but'
    echo '# for the body limit: a Static Repository is one body, 150 MB for the largest here.'
    echo '[harvest]'
    echo 'max_body_bytes = 1073741824'
  } >"$1/bridge.toml"
}

declare -A fig
largest=0
for n in $SIZES; do ((n > largest)) && largest=$n; done
log "writing $largest repositories' files (kept for the smaller sizes)"
python3 "$helper" generate "$work" "$largest" "$MEDIAN" "$SIGMA" "$MAX_RECORDS" "$LARGE_EVERY" "$LARGE_RECORDS"

for n in $SIZES; do
  dir=$work/n$n
  mkdir -p "$dir/repositories.d"
  [ "$n" = "$largest" ] || head -n "$n" "$work/sizes-$largest" >"$work/sizes-$n"
  for ((i = 0; i < n; i++)); do
    j=$(printf 'j%05d' "$i")
    printf '[[repository]]\nname = "%s"\nbase_url = "%s/data/%s.xml"\nplatform = "generic"\nscope = ["https://journals.example/%s/"]\n' \
      "$j" "$work" "$j" "$j" >"$dir/repositories.d/$j.toml"
  done
  config "$dir" ""
  records=$(awk '{ s += $1 } END { print s }' "$work/sizes-$n")
  fig[$n,records]=$records
  fig[$n,spread]=$(sort -n "$work/sizes-$n" | awk '{ a[NR] = $1 } END { printf "median %d, 90th percentile %d, 99th %d, largest %d", a[int(NR/2)], a[int(NR*0.9)], a[int(NR*0.99)], a[NR] }')

  log "$n repositories ($records records): first start"
  start_gateway "$dir"
  fig[$n,publish]=$ready
  log "every repository published after $ready s"
  urls=$(python3 "$helper" check "$GATEWAY" "$work" "$n") || { log "$urls URLs published, expected $records"; exit 1; }
  fig[$n,urls]=$urls
  fig[$n,refreshes]=$(grep -c 'refresh done' "$dir/gateway.log" || true)
  sleep 5 # the last refresh threads end and hand their memory back
  fig[$n,rss]=$(mib "$(status VmRSS)")
  fig[$n,hwm]=$(mib "$(status VmHWM)")
  fig[$n,threads]=$(status Threads)
  log "idle for $IDLE s"
  t0=$(ticks); w0=$(now)
  sleep "$IDLE"
  t1=$(ticks); w1=$(now)
  hz=$(getconf CLK_TCK)
  fig[$n,idle_ticks]=$((t1 - t0))
  fig[$n,idle_cpu]=$(python3 -c "print(f'{($t1 - $t0) / $hz / ($w1 - $w0) * 100:.3f}')")
  fig[$n,idle_bound]=$(python3 -c "print(f'{max($t1 - $t0, 1) / $hz / ($w1 - $w0) * 100:.3f}')")
  fig[$n,rss_idle]=$(mib "$(status VmRSS)")

  log "status page and metrics"
  probe=$(printf 'j%05d' $((n / 2 + 7)))
  read -r fig[$n,page_s] fig[$n,page_b] _ <<<"$(timed /)"
  read -r fig[$n,find_s] fig[$n,find_b] _ <<<"$(timed "/?q=$probe")"
  read -r fig[$n,problems_s] fig[$n,problems_b] _ <<<"$(timed "/?show=problems")"
  read -r fig[$n,last_s] fig[$n,last_b] _ <<<"$(timed "/?page=$(((n + 99) / 100))")"
  read -r fig[$n,metrics_s] fig[$n,metrics_b] fig[$n,metrics_n] <<<"$(timed /metrics)"
  curl -s "http://127.0.0.1:$ADMIN/metrics" >"$dir/metrics-refreshed.txt"
  # Unbounded after the refreshes, computed: the lines of one repository with series of its own
  # (the first), times the repositories, and the lines without a repository label.
  per_repo=$(grep -c 'repository="j00000"' "$dir/metrics-refreshed.txt")
  unlabelled=$(grep -v '^#' "$dir/metrics-refreshed.txt" | grep -vc 'repository="')
  fig[$n,per_repo]=$per_repo
  fig[$n,all_refreshed_n]=$((unlabelled + n * per_repo))

  log "reload (SIGHUP)"
  before=$(grep -c 'configuration reloaded' "$dir/gateway.log" || true)
  t0=$(now)
  kill -HUP "$pid"
  until [ "$(grep -c 'configuration reloaded' "$dir/gateway.log" || true)" -gt "$before" ]; do sleep 0.01; done
  fig[$n,reload]=$(secs "$t0" "$(now)")
  stop_gateway

  log "restart, every generation persisted"
  start_gateway "$dir"
  fig[$n,listening]=$listening
  fig[$n,ready]=$ready
  read -r fig[$n,restart_s] fig[$n,restart_b] fig[$n,restart_n] <<<"$(timed /metrics)"
  curl -s "http://127.0.0.1:$ADMIN/metrics" >"$dir/metrics-bounded.txt"
  sleep 5
  fig[$n,rss_restart]=$(mib "$(status VmRSS)")
  stop_gateway

  log "restart, metrics unbounded"
  config "$dir" 1000000
  start_gateway "$dir"
  read -r fig[$n,all_s] fig[$n,all_b] fig[$n,all_n] <<<"$(timed /metrics)"
  curl -s "http://127.0.0.1:$ADMIN/metrics" >"$dir/metrics-unbounded.txt"
  fig[$n,rss_unbounded]=$(mib "$(status VmRSS)")
  stop_gateway
  # Both scrapes pass Prometheus' own lint, as .ci/crawl.sh holds the gateway's to it.
  if command -v promtool >/dev/null; then
    for f in "$dir"/metrics-*bounded.txt; do
      awk -f .ci/classic-metrics.awk "$f" | promtool check metrics ||
        { log "promtool check metrics: $f"; exit 1; }
    done
    fig[$n,promtool]="pass"
  else
    fig[$n,promtool]="not run (no promtool)"
  fi
  # The sums are the same whatever the bound: every sample summed over its repository label
  # (the gauges: the restarted gateway has refreshed nothing, so its counters are 0).
  for f in "$dir"/metrics-*bounded.txt; do
    grep -E '^oai_bridge_(records|urls_published|identifiers_dropped)\{' "$f" |
      awk '{ sub(/\{.*\}/, "", $1); s[$1] += $2 } END { for (k in s) printf "%s=%d ", k, s[k] }' |
      tr ' ' '\n' | sort | tr '\n' ' ' >"$f.sums"
  done
  cmp -s "$dir/metrics-bounded.txt.sums" "$dir/metrics-unbounded.txt.sums" ||
    { log "the sums differ: $(cat "$dir"/metrics-*.sums)"; exit 1; }
  fig[$n,sums]=$(cat "$dir/metrics-bounded.txt.sums")
done

set -- $SIZES
small=$1
big=${!#}
n_first_repo_lines="${fig[$big,per_repo]} lines of one repository times the repositories, plus the rest"
ratio() { python3 -c "print(f'{float(\"${fig[$big,$1]}\") / max(float(\"${fig[$small,$1]}\"), 1e-9):.2f}x')"; }
kib() { python3 -c "print(f'{$1 / 1024:.0f} KiB')"; }
row() { # row LABEL KEY [UNIT]
  printf '| %s | %s%s | %s%s | %s |\n' "$1" "${fig[$small,$2]}" "${3:-}" "${fig[$big,$2]}" "${3:-}" "$(ratio "$2")"
}
sizes_row() { # sizes_row LABEL KEY: bytes as KiB
  printf '| %s | %s | %s | %s |\n' "$1" "$(kib "${fig[$small,$2]}")" "$(kib "${fig[$big,$2]}")" "$(ratio "$2")"
}
verdict() { python3 -c "print('pass' if $1 <= $2 else 'MISSED')"; }

cat >benches/fleet/RESULTS.md <<EOF
# Fleet benchmark results

One \`oai-bridge serve\` (at $commit, release build) for $small and then $big repositories, in
one run: a Static Repository file and a \`repositories.d/*.toml\` file (\`include\`) per
repository, with the default fleet controls (\`max_concurrent_refreshes = 4\`,
\`start_spread_secs = 30\`) and the default \`metrics_repository_series = 100\`;
\`max_body_bytes\` is raised to 1 GiB, since a Static Repository file is one body (150 MB for a
repository of 250,000 records). Record counts
are spread as real repositories' are: lognormal around $MEDIAN with sigma $SIGMA, from 10 to
$MAX_RECORDS, and one of $LARGE_RECORDS records every $LARGE_EVERY repositories (seeded: the
first $small of the $big are the $small). At $small: ${fig[$small,spread]}; at $big:
${fig[$big,spread]}. Every repository's sitemap index and shards were fetched and their URLs
counted before measuring.

Memory is the process's \`VmRSS\` from \`/proc/PID/status\` once every repository is published
(5 s after the last), and \`VmHWM\`, its peak since the start; idle CPU is \`utime + stime\` from
\`/proc/PID/stat\` over $IDLE s after that, with every repository scheduled (none is due for 6
hours). A scrape after the refreshes has each repository's counters and histograms; one after a
restart has none yet (no refresh has run in the process), only the gauges: both bounds are
measured after a restart, and the unbounded scrape after the refreshes is computed from the
bounded one (the lines of one repository with series of its own, times the repositories).
Page and scrape times are the median of $ROUNDS requests on one kept-alive connection
(Python's \`http.client\`, the whole body read); samples are the lines that are not comments. The
reload is a SIGHUP with the same files, until the log says \`configuration reloaded\`. The
restart starts the process again on the state the first start left (every generation
persisted): listening is until the admin listener answers \`/healthz\`, ready until \`/readyz\`
answers 200.

Machine: $(uname -m), $(nproc) cores, Linux $(uname -r), shared with other work during the run
(a CI run and two other engineers' builds and benchmarks): load average $(cut -d' ' -f1-3 /proc/loadavg) at the
end. Absolute times are those of a busy machine; the ratios compare figures of one run.

Reproduce with:

\`\`\`sh
bash benches/fleet/run.sh
\`\`\`

| figure | $small repositories | $big repositories | growth |
| --- | ---: | ---: | ---: |
| records | ${fig[$small,records]} | ${fig[$big,records]} | $(ratio records) |
| URLs published (all checked) | ${fig[$small,urls]} | ${fig[$big,urls]} | $(ratio urls) |
| refreshes | ${fig[$small,refreshes]} | ${fig[$big,refreshes]} | $(ratio refreshes) |
$(row "start to every repository published" publish " s")
$(row "threads" threads)
$(row "VmRSS, all published" rss " MiB")
$(row "VmHWM (peak)" hwm " MiB")
$(row "VmRSS after $IDLE s idle" rss_idle " MiB")
| CPU while idle | ${fig[$small,idle_cpu]}% of a core (${fig[$small,idle_ticks]} ticks) | ${fig[$big,idle_cpu]}% (${fig[$big,idle_ticks]} ticks) | at most ${fig[$big,idle_bound]}% |
$(row "status page, first page: time" page_s " s")
$(sizes_row "status page, first page: size" page_b)
$(row "status page, search by name (\`?q=\`): time" find_s " s")
$(sizes_row "status page, search by name: size" find_b)
$(row "status page, problems (\`?show=problems\`, none): time" problems_s " s")
$(row "status page, last page: time" last_s " s")
$(row "/metrics after the refreshes, default bound (100): time" metrics_s " s")
$(sizes_row "/metrics after the refreshes, default bound: size" metrics_b)
$(row "/metrics after the refreshes, default bound: samples" metrics_n)
$(row "/metrics after the refreshes, unbounded: samples (computed: $n_first_repo_lines)" all_refreshed_n)
$(row "/metrics after a restart, default bound: time" restart_s " s")
$(sizes_row "/metrics after a restart, default bound: size" restart_b)
$(row "/metrics after a restart, default bound: samples" restart_n)
$(row "/metrics after a restart, unbounded: time" all_s " s")
$(sizes_row "/metrics after a restart, unbounded: size" all_b)
$(row "/metrics after a restart, unbounded: samples" all_n)
$(row "VmRSS, restarted, unbounded metrics" rss_unbounded " MiB")
$(row "reload (SIGHUP, same files)" reload " s")
$(row "restart: start to listening" listening " s")
$(row "restart: start to ready" ready " s")
$(row "VmRSS 5 s after the restart" rss_restart " MiB")

\`promtool check metrics\` on both scrapes: ${fig[$small,promtool]} at $small, ${fig[$big,promtool]} at $big.
The sums over the repository label of \`oai_bridge_records\`, \`oai_bridge_urls_published\` and
\`oai_bridge_identifiers_dropped\` are the same bounded and unbounded (the script checks it): at $big,
${fig[$big,sums]}.

| target | $small | $big |
| --- | --- | --- |
| under $RSS_TARGET_MIB MiB RSS with every repository published (peak) | ${fig[$small,hwm]} MiB, $(verdict "${fig[$small,hwm]}" "$RSS_TARGET_MIB") | ${fig[$big,hwm]} MiB, $(verdict "${fig[$big,hwm]}" "$RSS_TARGET_MIB") |
| idle under $CPU_TARGET_PCT% of a core | at most ${fig[$small,idle_bound]}%, $(verdict "${fig[$small,idle_bound]}" "$CPU_TARGET_PCT") | at most ${fig[$big,idle_bound]}%, $(verdict "${fig[$big,idle_bound]}" "$CPU_TARGET_PCT") |
EOF
cat benches/fleet/RESULTS.md
if [ "$STRICT" = 1 ]; then
  for n in $SIZES; do
    [ "$(verdict "${fig[$n,hwm]}" "$RSS_TARGET_MIB")" = pass ] &&
      [ "$(verdict "${fig[$n,idle_bound]}" "$CPU_TARGET_PCT")" = pass ] || exit 3
  done
fi
