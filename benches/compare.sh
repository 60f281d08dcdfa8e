#!/usr/bin/env bash
# Before/after comparison (issue 21, point 8: "behaviour unchanged, measured"): builds oai-bridge
# as of two commits and runs the main workload of each benchmark (harvest, profiles, incremental,
# serve, load) with the two binaries alternately, ROUNDS times in one run, which one goes first
# changing from round to round (before, after; after, before; ...: the second run of a pair
# found a warmer or a more loaded machine in past runs, and always running `before` first
# turned that into a ratio), against one upstream per benchmark (the same data for both).
# Reports the median of each figure for each binary, the ratio after/before, and flags every
# gated figure outside ±5%; checks that both publish the same bytes. Writes benches/compare-RESULTS.md (and prints it).
#
#   bash benches/compare.sh BASE [AFTER]         # AFTER defaults to HEAD (committed, not the working tree)
#   bash benches/compare.sh c04404c              # the refactor of issue 21 against main's HEAD
#   ONLY=harvest,profiles ROUNDS=5 bash benches/compare.sh c04404c
#   RECORDS=20000 ROUNDS=1 SERVE_DURATION=2 LOAD_DURATION=15 bash benches/compare.sh c04404c   # a quick check
#   bash benches/compare.sh HEAD HEAD            # the same binary twice: how much the figures move by noise
#
# Both commits are built from `git archive` (lib.sh's build_rev: target/bench-rev/), never from
# the working tree. What each benchmark runs, the same workload as its run.sh without the peers:
#   harvest      the plain export of RECORDS (1,000,000) records, 500 a page (benches/harvest)
#   profiles     exports with https landing pages and the same --scope: plain, + Signmap, OCX and
#                DiWoo x5, + CDIF lists; the gateway's first refresh, plain and with those
#                profiles (benches/profiles; the page cache is dropped before each run as root)
#   incremental  RECORDS (1,000,000): a plain export, a full export through the store, the
#                gateway's first refresh and its restart with the upstream stopped, an
#                incremental export after 1% of the records changed (benches/incremental), then
#                a full re-harvest onto the stored records (--full-harvest-interval)
#   serve        wrk, 32 connections, on /robots.txt, a 50,000-URL shard (gzip negotiated) and
#                the same shard as .xml.gz: requests/s at saturation and p99 under a fixed load
#                (the delay set from the first `before` run), idle and while the gateway
#                refreshes RECORDS (1,000,000) records back to back (benches/serve)
#   load         wrk, 64 connections, every file of the generation in turn, while the gateway
#                harvests RECORDS (250,000) records in full back to back; requests/s, p99, errors,
#                refreshes finished, peak RSS (benches/load)
#   platforms    (only when ONLY names it) the landing rules (benches/platforms): RECORDS
#                (1,000,000) records in DSpace 6's, EPrints 3.4's and the harvest benchmark's
#                shape, exported with the platform's rule and with auto (auto alone on the
#                generic shape); `ONLY=platforms bash benches/compare.sh a1a539d` measures the
#                rows' interpreter against the match arms it replaced
# Exports: CPU-seconds (user + sys) and wall seconds with GNU time (gated), peak RSS (for
# information). Gateway refreshes: CPU-seconds from /proc until the files answer (gated).
# Figures marked "info" are shown with their ratio but never flagged (memory, counts, a restart's
# few milliseconds). Round 0 (WARMUP=1) runs everything once, uncounted: the first runs after a
# build or an upstream's start varied most; the outputs of the two binaries are compared in it.
#
# Knobs (environment): ROUNDS (3), WARMUP (1; 0 skips the uncounted round), ONLY (a comma list of
# harvest,profiles,incremental,serve,load; all by default), RECORDS (each benchmark's own, as
# above), PROFILE_RUNS ("plain profiles lists gw-plain gw-profiles"; also `all`, CDIF's file per
# record), SERVE_DURATION (8 s a wrk run), LOAD_DURATION (60 s, after a LOAD_WARMUP of 10 s),
# PORT (18860; it uses the next nine too), STRICT=1 (exit 3 when a gated figure is outside ±5%).
# Exit status: 0; 1 when a run failed or a behaviour check did not pass; 3 (STRICT).
# Loopback only; the gateway runs on core 0, wrk and the upstream on core 1 for serve and load;
# every step is bounded by `timeout`; what it starts is stopped on exit. It installs GNU time and
# wrk with apt-get when missing. Everything it writes stays under target/ (target/bench-compare/,
# target/bench-rev/, target/bench-server/) except benches/compare-RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: bash benches/compare.sh BASE [AFTER]" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-1}
ONLY=${ONLY:-harvest,profiles,incremental,serve,load}
RECORDS=${RECORDS:-}
PROFILE_RUNS=${PROFILE_RUNS:-plain profiles lists gw-plain gw-profiles}
SERVE_DURATION=${SERVE_DURATION:-8}
LOAD_DURATION=${LOAD_DURATION:-60}
LOAD_WARMUP=${LOAD_WARMUP:-10}
PORT=${PORT:-18860}
STRICT=${STRICT:-0}

work=$(pwd)/target/bench-compare
server_bin=target/bench-server/release/oai-bench-server
mkdir -p "$work"
# One run at a time: two would share the ports, the folders and the CPU.
exec 9>"$work/lock"
flock -n 9 || { echo "another comparison is running" >&2; exit 1; }
# shellcheck source=benches/lib.sh
source benches/lib.sh

for b in ${ONLY//,/ }; do
  case $b in harvest | profiles | incremental | serve | load | platforms) ;; *) log "unknown benchmark $b"; exit 2 ;; esac
done
selected() { [[ ",$ONLY," == *",$1,"* ]]; }
tools=(/usr/bin/time:time curl:curl)
{ selected serve || selected load; } && tools+=(wrk:wrk taskset:util-linux)
install_missing "${tools[@]}"

base=$(git rev-parse --verify "$1^{commit}")
after=$(git rev-parse --verify "${2:-HEAD}^{commit}")
declare -A bin_of=([before]=$work/before/oai-bridge [after]=$work/after/oai-bridge)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1 /proc/loadavg)
build_rev "$base" "${bin_of[before]}"
build_rev "$after" "${bin_of[after]}"
build_server

first_round=1
[ "$WARMUP" = 1 ] && first_round=0
rounds=$(seq "$first_round" "$ROUNDS")
# The round where the two binaries' outputs are compared: the uncounted one when there is one.
verify_round=$first_round
# sides_of ROUND: the two sides in the order they run in ROUND. The verifying round runs
# `before` first (same_as_before keeps its digests); the counted rounds after it alternate.
sides_of() {
  if [ "$1" = "$verify_round" ] || [ $(($1 % 2)) = 0 ]; then echo before after; else echo after before; fi
}
: >"$work/figures.tsv"
: >"$work/checks.tsv"

# record BENCH FIGURE gate|info ROUND SIDE VALUE: a row of figures.tsv (round 0 is not counted).
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/figures.tsv"; }
# check BENCH WHAT OK DETAIL: a behaviour check (OK 1 or 0); a check passes when all its rows do.
check() {
  printf '%s\t%s\t%s\t%s\n' "$@" >>"$work/checks.tsv"
  [ "$3" = 1 ] || log "$1: $2: FAILED ($4)"
}
same_as_before() { # BENCH WHAT SIDE VALUE: before's VALUE is kept; after's must equal it
  local key=$work/same-$(printf '%s' "$1 $2" | tr -c 'a-zA-Z0-9' _)
  if [ "$3" = before ]; then
    printf '%s\n' "$4" >"$key"
  else
    local was
    was=$(cat "$key")
    if [ "$was" = "$4" ]; then check "$1" "$2" 1 "$4"
    else check "$1" "$2" 0 "before $was, after $4"; fi
  fi
}
digest_dir() { # DIR: one digest of every file's path and bytes
  (cd "$1" && find . -type f -print0 | sort -z | xargs -0r sha256sum) | sha256sum | cut -c1-16
}
add() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", a + b }'; }
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", e - s }'; } # seconds since $1

# The processes each benchmark starts; stop_all stops them (lib.sh's cleanup does on exit).
# A stopped process leaves `pids`, so that its id, once reused, is never signalled.
stop_pid() {
  local p kept=()
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || kept+=("$p"); done
  pids=("${kept[@]}")
}
stop_all() {
  local p
  for p in "${pids[@]}"; do stop_pid "$p"; done
}
# upstream NAME PORT CORE ARGS...: the benchmark upstream (CORE "" for no pinning), until it listens.
upstream_pid=
upstream() {
  local name=$1 port=$2 core=$3
  shift 3
  local pin=()
  [ -n "$core" ] && pin=(taskset -c "$core")
  "${pin[@]}" "$server_bin" --port "$port" --page-size 500 "$@" 2>"$work/upstream-$name.log" &
  upstream_pid=$!
  pids+=("$upstream_pid")
  wait_port "$port" "$upstream_pid" "$work/upstream-$name.log"
}
# gateway SIDE CONFIG CORE: `serve` with CONFIG (CORE "" for no pinning); sets gateway_pid. Its
# admin listener (/metrics since issue 22) on ADMIN_PORT: one gateway runs at a time. A binary
# from before the admin listener ignores the variable and answers /metrics on its public port.
gateway_pid=
ADMIN_PORT=${ADMIN_PORT:-18899}
gateway() {
  local pin=()
  [ -n "$3" ] && pin=(taskset -c "$3")
  OAI_BRIDGE_ADMIN_LISTEN=127.0.0.1:$ADMIN_PORT "${pin[@]}" "${bin_of[$1]}" serve --config "$2" -q \
    >>"$2.log" 2>&1 &
  gateway_pid=$!
  pids+=("$gateway_pid")
}
stop_gateway() { stop_pid "$gateway_pid"; }
# until_200 URL PID LIMIT_S: until URL answers 200; fails when PID exits or after LIMIT_S seconds.
until_200() {
  local waited=0 limit=$(($3 * 20))
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ]; do
    kill -0 "$2" 2>/dev/null || { log "the gateway exited before $1 answered"; exit 1; }
    ((waited++ < limit)) || { log "$1 did not answer within $3 s"; exit 1; }
    sleep 0.05
  done
}
cpu_of() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($14 + $15) / t }' "/proc/$1/stat"; }
hwm_of() { awk '/^VmHWM/ { printf "%.1f\n", $2 / 1024 }' "/proc/$1/status"; }

# export_run BENCH LABEL SIDE ROUND OUT ARGS...: one `export` into OUT under GNU time. Its
# CPU-seconds and wall time are gated figures, its peak RSS one for information.
drop_caches=0
export_run() {
  local bench=$1 label=$2 side=$3 round=$4 out=$5 status=0 wall user sys rss
  shift 5
  sync
  if [ "$drop_caches" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
  timeout 1800 /usr/bin/time -o "$work/time" -f '%e %U %S %M' "${bin_of[$side]}" export \
    --out "$out" --no-progress -q "$@" >"$work/last.stdout" 2>"$work/last.stderr" || status=$?
  read -r wall user sys rss < <(tail -1 "$work/time")
  check "$bench" "every $label exits 0" "$((status == 0))" "$side round $round: exit $status"
  [ "$status" = 0 ] || tail -n 5 "$work/last.stderr" >&2
  record "$bench" "$label: CPU s" gate "$round" "$side" "$(add "$user" "$sys")"
  record "$bench" "$label: wall s" gate "$round" "$side" "$wall"
  record "$bench" "$label: peak RSS MiB" info "$round" "$side" \
    "$(awk -v k="$rss" 'BEGIN { printf "%.1f\n", k / 1024 }')"
  log "$bench, $label, $side (round $round): exit $status, $(add "$user" "$sys") CPU s, $wall s"
  if [ "$round" = "$verify_round" ] && [ -d "$out" ]; then
    same_as_before "$bench" "$label: the same files, byte for byte" "$side" "$(digest_dir "$out")"
  fi
}

# gateway_refresh BENCH LABEL SIDE ROUND CONFIG URL FOLDER_URL INDEX...: `serve` from its start
# until URL answers (its first refresh, through its store): CPU-seconds from /proc (gated), wall
# seconds and VmHWM (information). In the verifying round, each sitemap index INDEX under
# FOLDER_URL and every file it lists must be the same bytes for both binaries. The gateway is
# stopped; its state stays.
gateway_refresh() {
  local bench=$1 label=$2 side=$3 round=$4 start cpu
  sync
  if [ "$drop_caches" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
  start=$(date +%s.%N)
  gateway "$side" "$5" ""
  until_200 "$6" "$gateway_pid" 1800
  cpu=$(cpu_of "$gateway_pid")
  record "$bench" "$label: CPU s" gate "$round" "$side" "$cpu"
  record "$bench" "$label: wall s" info "$round" "$side" "$(since "$start")"
  record "$bench" "$label: peak RSS MiB" info "$round" "$side" "$(hwm_of "$gateway_pid")"
  log "$bench, $label, $side (round $round): $cpu CPU s"
  if [ "$round" = "$verify_round" ]; then
    local served
    served=$(served_digest "${@:7}")
    check "$bench" "$label: every file listed answers" "$([[ $served == *missing* ]] && echo 0 || echo 1)" \
      "$side: $served"
    same_as_before "$bench" "$label: the same files served" "$side" "$served"
  fi
  stop_gateway
}
served_digest() { # FOLDER_URL INDEX...: a digest of each sitemap index and every file it lists
  local folder=$1 index body loc files=0 missing=""
  shift
  : >"$work/served"
  for index in "$@"; do
    body=$(curl -sf "$folder/$index") || { missing+=" $index"; continue; }
    # An index's <lastmod> is the time of the harvest, not a property of the binary.
    printf '%s\n' "$body" | sed 's|<lastmod>[^<]*</lastmod>||g' >>"$work/served"
    files=$((files + 1))
    for loc in $(printf '%s' "$body" | grep -o '<loc>[^<]*</loc>' | sed 's/<[^>]*>//g'); do
      curl -sf "$folder/${loc##*/}" >>"$work/served" || missing+=" ${loc##*/}"
      files=$((files + 1))
    done
  done
  echo "$(sha256sum <"$work/served" | cut -c1-16) ($files files${missing:+; missing:$missing})"
}

# --- harvest --------------------------------------------------------------------------------------
harvest_bench() {
  local records=${RECORDS:-1000000} port=$PORT
  log "harvest: $records records, 500 a page"
  upstream harvest "$port" "" --records "$records"
  for round in $rounds; do
    for side in $(sides_of "$round"); do
      rm -rf "$work/out"
      export_run harvest export "$side" "$round" "$work/out" \
        --base-url "http://127.0.0.1:$port/oai/request" --public-url "http://127.0.0.1:$port/oai/"
    done
  done
  rm -rf "$work/out"
  stop_all
}

# --- profiles -------------------------------------------------------------------------------------
profiles_bench() {
  local records=${RECORDS:-1000000} port=$((PORT + 1)) gw=$((PORT + 2)) diwoo=() toml indexes
  log "profiles: $records records, https landing pages"
  upstream profiles "$port" "" --records "$records" --https-identifiers
  for i in 0 1 2 3 4; do diwoo+=(--diwoo "com_$i=$((i + 1))"); done
  declare -A flags=(
    [plain]=""
    [profiles]="--signmap --ocx ${diwoo[*]}"
    [lists]="--signmap --ocx --cdif-list ${diwoo[*]}"
    [all]="--signmap --ocx --cdif ${diwoo[*]}"
  )
  declare -A labels=(
    [plain]="plain export"
    [profiles]="export + Signmap, OCX, DiWoo x5"
    [lists]="export + Signmap, OCX, CDIF lists, DiWoo x5"
    [all]="export + Signmap, OCX, CDIF documents, DiWoo x5"
    [gw-plain]="gateway's first refresh, plain"
    [gw-profiles]="gateway's first refresh + Signmap, OCX, DiWoo x5"
  )
  [ "$(id -u)" = 0 ] && drop_caches=1
  for round in $rounds; do
    for kind in $PROFILE_RUNS; do
      [ -n "${labels[$kind]:-}" ] || { log "PROFILE_RUNS: unknown $kind"; exit 2; }
      for side in $(sides_of "$round"); do
        case $kind in
          gw-*)
            rm -rf "$work/gw"
            mkdir -p "$work/gw"
            toml=$work/gw/bridge.toml
            cat >"$toml" <<TOML
[server]
listen = "127.0.0.1:$gw"
state_dir = "$work/gw/state"
[[repository]]
name = "bench"
base_url = "http://127.0.0.1:$port/oai/request"
scope = ["https://127.0.0.1:$port/oai/"]
TOML
            if [ "$kind" = gw-profiles ]; then
              cat >>"$toml" <<'TOML'
signmap = true
diwoo = { "com_0" = 1, "com_1" = 2, "com_2" = 3, "com_3" = 4, "com_4" = 5 }
[repository.ocx]
enabled = true
TOML
            fi
            indexes=(sitemap.xml)
            [ "$kind" = gw-profiles ] &&
              indexes+=(signmap.xml ocx.xml sitemapindex-diwoo-infocat00{1,2,3,4,5}.xml)
            gateway_refresh profiles "${labels[$kind]}" "$side" "$round" "$toml" \
              "http://127.0.0.1:$gw/bench/sitemap.xml" "http://127.0.0.1:$gw/bench" "${indexes[@]}"
            rm -rf "$work/gw"
            ;;
          *)
            rm -rf "$work/out"
            # shellcheck disable=SC2086
            export_run profiles "${labels[$kind]}" "$side" "$round" "$work/out" \
              --base-url "http://127.0.0.1:$port/oai/request" --public-url "https://127.0.0.1:$port/oai/" \
              --scope "https://127.0.0.1:$port/oai/" ${flags[$kind]}
            rm -rf "$work/out"
            ;;
        esac
      done
    done
  done
  drop_caches=0
  stop_all
}

# --- incremental ----------------------------------------------------------------------------------
incremental_bench() {
  local records=${RECORDS:-1000000} port=$((PORT + 3)) gw=$((PORT + 4)) base_url public_url start
  base_url="http://127.0.0.1:$port/oai/request"
  public_url="http://127.0.0.1:$port/oai/"
  log "incremental: $records records, then every 100th changed"
  for round in $rounds; do
    # Identify says deletions are transient, so that a harvest in full comes due with
    # --full-harvest-interval (the last run below); the earlier runs are as with persistent ones.
    upstream incremental-1 "$port" "" --records "$records" --deleted-record transient
    for side in $(sides_of "$round"); do
      rm -rf "$work/out"
      export_run incremental "plain export" "$side" "$round" "$work/out" --base-url "$base_url" \
        --public-url "$public_url"
      rm -rf "$work/out"
    done
    for side in $(sides_of "$round"); do
      rm -rf "$work/inc-$side"
      mkdir -p "$work/inc-$side"
      export_run incremental "full export through the store" "$side" "$round" "$work/inc-$side/out" \
        --base-url "$base_url" --public-url "$public_url" --state "$work/inc-$side/state"
    done
    for side in $(sides_of "$round"); do
      mkdir -p "$work/inc-$side/gw"
      cat >"$work/inc-$side/gw/bridge.toml" <<TOML
[server]
listen = "127.0.0.1:$gw"
state_dir = "$work/inc-$side/gw/state"
[[repository]]
name = "r"
base_url = "$base_url"
refresh_interval_secs = 86400
TOML
      gateway_refresh incremental "gateway's first refresh" "$side" "$round" \
        "$work/inc-$side/gw/bridge.toml" "http://127.0.0.1:$gw/readyz" "http://127.0.0.1:$gw/r" sitemap.xml
    done
    stop_all # the restarted gateway must not need the upstream to serve
    for side in $(sides_of "$round"); do
      start=$(date +%s.%N)
      gateway "$side" "$work/inc-$side/gw/bridge.toml" ""
      until_200 "http://127.0.0.1:$gw/r/sitemap.xml" "$gateway_pid" 30
      record incremental "gateway's restart: s until its index answers" info "$round" "$side" \
        "$(since "$start")"
      local code
      code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gw/r/sitemap-1.xml")
      check incremental "the restarted gateway serves its first shard" "$((code == 200))" "$side round $round: $code"
      stop_gateway
    done
    upstream incremental-2 "$port" "" --records "$records" --changed-every 100 --deleted-record transient \
      --response-date 2025-10-01T00:00:00Z --expected-urls "$work/inc-expected.urls"
    for side in $(sides_of "$round"); do
      export_run incremental "incremental export through the store" "$side" "$round" \
        "$work/inc-$side/out" --base-url "$base_url" --public-url "$public_url" --state "$work/inc-$side/state"
      if [ "$round" = "$verify_round" ]; then
        python3 benches/harvest/sitemap_urls.py "$work/inc-$side/out" "$work/inc-$side.urls" >/dev/null 2>&1
        if cmp -s "$work/inc-$side.urls" "$work/inc-expected.urls"; then
          check incremental "the incremental result is the changed repository's URL set" 1 "$side"
        else
          check incremental "the incremental result is the changed repository's URL set" 0 "$side round $round differs"
        fi
      fi
    done
    # A full harvest onto the stored records (a week's full harvest of a repository without
    # persistent deletions): every record is read and written back unchanged.
    for side in $(sides_of "$round"); do
      export_run incremental "full re-harvest onto the stored records" "$side" "$round" \
        "$work/inc-$side/out" --base-url "$base_url" --public-url "$public_url" \
        --state "$work/inc-$side/state" --full-harvest-interval 1
    done
    stop_all
    rm -rf "$work/inc-before" "$work/inc-after"
  done
}

# --- wrk ------------------------------------------------------------------------------------------
wrk_rps() { awk '/^Requests\/sec:/ { print $2 }' "$1"; }
wrk_ms() { # FILE PERCENT: that percentile of the latency distribution, in ms
  awk -v p="$2" '$1 == p { v = $2
    if (sub(/us$/, "", v)) v /= 1000; else if (sub(/ms$/, "", v)) v += 0
    else if (sub(/m$/, "", v)) v *= 60000; else if (sub(/s$/, "", v)) v *= 1000
    printf "%.3f\n", v }' "$1"
}
wrk_errors() {
  awk '/Non-2xx or 3xx responses:/ { n += $NF }
    /Socket errors:/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' "$1"
}

# --- serve ----------------------------------------------------------------------------------------
serve_bench() {
  local records=${RECORDS:-1000000} small=$((PORT + 5)) big=$((PORT + 6)) gw=$((PORT + 7)) toml
  log "serve: a 50,000-URL shard; refreshes of $records records"
  upstream serve-small "$small" 1 --records 40000
  upstream serve-big "$big" 1 --records "$records"
  cat >"$work/delay.lua" <<'LUA'
local ms = tonumber(os.getenv("DELAY_MS"))
function delay() return ms end
LUA
  rm -f "$work"/serve-*.delay
  for round in $rounds; do
    for side in $(sides_of "$round"); do
      rm -rf "$work/serve"
      mkdir -p "$work/serve"
      toml=$work/serve/bridge.toml
      cat >"$toml" <<TOML
[server]
listen = "127.0.0.1:$gw"
state_dir = "$work/serve/state"
[[repository]]
name = "r"
base_url = "http://127.0.0.1:$small/oai/request"
gzip = true
TOML
      gateway "$side" "$toml" 0
      wait_port "$gw" "$gateway_pid" "$toml.log"
      until_200 "http://127.0.0.1:$gw/r/sitemap.xml" "$gateway_pid" 300
      if [ "$round" = "$verify_round" ]; then
        local urls sums=""
        urls=$(curl -s "http://127.0.0.1:$gw/r/sitemap-1.xml" | grep -o '<loc>' | wc -l)
        check serve "the first shard holds 50,000 URLs" "$((urls == 50000))" "$side: $urls"
        for path in robots.txt r/sitemap-1.xml r/sitemap-1.xml.gz; do
          for enc in identity gzip; do
            sums+="$(curl -s -H "Accept-Encoding: $enc" "http://127.0.0.1:$gw/$path" | sha256sum | cut -c1-16) "
          done
        done
        same_as_before serve "the same bodies (robots.txt, the shard, its .gz; plain and gzip)" "$side" "$sums"
      fi
      serve_files idle "$side" "$round" "$gw"
      stop_gateway
      cat >>"$toml" <<TOML
[[repository]]
name = "big"
base_url = "http://127.0.0.1:$big/oai/request"
refresh_interval_secs = 1
TOML
      gateway "$side" "$toml" 0
      wait_port "$gw" "$gateway_pid" "$toml.log"
      until_200 "http://127.0.0.1:$gw/r/sitemap.xml" "$gateway_pid" 300
      sleep 1 # the big repository's first refresh has started
      local before after
      before=$(metric "$gw" 'oai_bridge_upstream_requests_total{repository="big"')
      serve_files refreshing "$side" "$round" "$gw"
      after=$(metric "$gw" 'oai_bridge_upstream_requests_total{repository="big"')
      check serve "the big repository refreshed during the runs" "$(( ${after:-0} > ${before:-0} ))" \
        "$side round $round: $(( ${after:-0} - ${before:-0} )) upstream requests"
      stop_gateway
    done
  done
  rm -rf "$work/serve"
  stop_all
}
# metric PORT SERIES: the sum of the gateway's series that start with SERIES (an upstream's
# requests, over the status codes that label them since issue 22), from its admin listener's
# /metrics, or its public one's (PORT) for a binary from before the admin listener.
metric() {
  { curl -sf "http://127.0.0.1:$ADMIN_PORT/metrics" || curl -sf "http://127.0.0.1:$1/metrics"; } |
    awk -v m="$2" 'index($1, m) == 1 { s += $2 } END { print s + 0 }'
}
# serve_files PHASE SIDE ROUND PORT: each file at saturation, then under a fixed load (every
# connection waits the same delay between requests: about half the first `before` run's rate).
serve_files() {
  local phase=$1 side=$2 round=$3 port=$4 target name path label f rps delay
  for target in robots:robots.txt:/robots.txt shard:r/sitemap-1.xml:"the shard, gzip negotiated" \
    gz:r/sitemap-1.xml.gz:"the shard as .xml.gz"; do
    IFS=: read -r name path label <<<"$target"
    f=$work/serve-$phase-$name-$side-$round
    serve_wrk "$f.sat" "$port" "$path" 0
    rps=$(wrk_rps "$f.sat")
    [ -f "$work/serve-$phase-$name.delay" ] ||
      awk -v r="$rps" 'BEGIN { d = int(32 * 1000 / (r / 2) + 0.5); print (d < 1 ? 1 : d) }' \
        >"$work/serve-$phase-$name.delay"
    delay=$(cat "$work/serve-$phase-$name.delay")
    serve_wrk "$f.fixed" "$port" "$path" "$delay"
    record serve "$phase, $label: req/s at saturation" gate "$round" "$side" "$rps"
    record serve "$phase, $label: p99 ms at a fixed load" gate "$round" "$side" "$(wrk_ms "$f.fixed" 99%)"
    log "serve, $phase $name, $side (round $round): $rps req/s; p99 $(wrk_ms "$f.fixed" 99%) ms with $delay ms between requests"
  done
}
serve_wrk() { # OUT PORT PATH DELAY_MS (0: none)
  local script=() errors
  [ "$4" != 0 ] && script=(-s "$work/delay.lua")
  DELAY_MS=$4 timeout $((SERVE_DURATION + 60)) taskset -c 1 wrk -t1 -c32 -d"${SERVE_DURATION}s" --latency \
    -H 'Accept-Encoding: gzip' "${script[@]}" "http://127.0.0.1:$2/$3" >"$1" 2>&1 || { cat "$1" >&2; exit 1; }
  errors=$(wrk_errors "$1")
  check serve "no errors under wrk" "$((errors == 0))" "${1##*/}: $errors"
}

# --- load -----------------------------------------------------------------------------------------
load_bench() {
  local records=${RECORDS:-250000} up=$((PORT + 8)) gw=$((PORT + 9)) toml
  log "load: $records records, refreshed in full back to back"
  upstream load "$up" 1 --records "$records" --deleted-record transient
  cat >"$work/mix.lua" <<'LUA'
local paths = {}
for line in io.lines(os.getenv("PATHS")) do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], { ["Accept-Encoding"] = "gzip" })
end
LUA
  for round in $rounds; do
    for side in $(sides_of "$round"); do
      rm -rf "$work/load"
      mkdir -p "$work/load"
      toml=$work/load/bridge.toml
      cat >"$toml" <<TOML
[server]
listen = "127.0.0.1:$gw"
state_dir = "$work/load/state"
[[repository]]
name = "big"
base_url = "http://127.0.0.1:$up/oai/request"
gzip = true
signmap = true
refresh_interval_secs = 1
full_harvest_interval_secs = 1
TOML
      gateway "$side" "$toml" 0
      wait_port "$gw" "$gateway_pid" "$toml.log"
      until_200 "http://127.0.0.1:$gw/readyz" "$gateway_pid" 300
      # The rotation: every file of the generation served (as benches/load/run.sh builds it).
      local paths=$work/load-paths-$side loc index
      echo /robots.txt >"$paths"
      for index in sitemap.xml signmap.xml; do
        echo "/big/$index" >>"$paths"
        for loc in $(curl -sf "http://127.0.0.1:$gw/big/$index" | grep -o '<loc>[^<]*</loc>' | sed 's/<[^>]*>//g'); do
          echo "/big/${loc##*/}" >>"$paths"
          case $loc in *.xml.gz) echo "/big/$(basename "$loc" .gz)" >>"$paths" ;; esac
        done
      done
      if [ "$round" = "$verify_round" ]; then
        same_as_before load "the same files in the rotation" "$side" \
          "$(sort "$paths" | sha256sum | cut -c1-16) ($(wc -l <"$paths") paths)"
      fi
      load_wrk "$work/load-warmup-$side-$round" "$gw" "$LOAD_WARMUP" "$paths"
      local ok0 failed0 ok1 failed1 f=$work/load-$side-$round errors
      ok0=$(metric "$gw" 'oai_bridge_harvests_total{repository="big",outcome="success"}')
      failed0=$(metric "$gw" 'oai_bridge_harvests_total{repository="big",outcome="failure"}')
      load_wrk "$f" "$gw" "$LOAD_DURATION" "$paths"
      ok1=$(metric "$gw" 'oai_bridge_harvests_total{repository="big",outcome="success"}')
      failed1=$(metric "$gw" 'oai_bridge_harvests_total{repository="big",outcome="failure"}')
      errors=$(wrk_errors "$f")
      check load "zero errors under load during refreshes" "$((errors == 0))" "$side round $round: $errors"
      check load "no refresh failed" "$(( ${failed1:-0} - ${failed0:-0} == 0 ))" \
        "$side round $round: $(( ${failed1:-0} - ${failed0:-0} )) failed"
      record load "req/s" gate "$round" "$side" "$(wrk_rps "$f")"
      record load "p99 ms" gate "$round" "$side" "$(wrk_ms "$f" 99%)"
      record load "p50 ms" info "$round" "$side" "$(wrk_ms "$f" 50%)"
      record load "refreshes finished during the load" info "$round" "$side" "$(( ${ok1:-0} - ${ok0:-0} ))"
      record load "gateway's peak RSS MiB" info "$round" "$side" "$(hwm_of "$gateway_pid")"
      log "load, $side (round $round): $(wrk_rps "$f") req/s, p99 $(wrk_ms "$f" 99%) ms, $errors errors, $(( ${ok1:-0} - ${ok0:-0} )) refreshes"
      stop_gateway
    done
  done
  rm -rf "$work/load"
  stop_all
}
load_wrk() { # OUT PORT DURATION PATHS
  PATHS=$4 timeout $(($3 + 60)) taskset -c 1 wrk -t1 -c64 -d"$3s" --timeout 5s --latency \
    -s "$work/mix.lua" "http://127.0.0.1:$2" >"$1" 2>&1 || { cat "$1" >&2; exit 1; }
}

# --- platforms ------------------------------------------------------------------------------------
# The landing rules, as benches/platforms/run.sh measures them, the two binaries alternating on
# the same upstream: each shape's own platform and auto, which must find it (their files must be
# the same bytes for both binaries); auto on the generic shape, Google's rule after detection.
platforms_bench() {
  local records=${RECORDS:-1000000} port=$PORT shape variant base variants
  for shape in dspace eprints generic; do
    log "platforms: $records records in the $shape shape"
    upstream "platforms-$shape" "$port" "" --records "$records" --shape "$shape"
    case $shape in
      dspace) base="http://127.0.0.1:$port/oai/request" variants="dspace auto" ;;
      eprints) base="http://127.0.0.1:$port/cgi/oai2" variants="eprints auto" ;;
      *) base="http://127.0.0.1:$port/oai/request" variants="auto" ;;
    esac
    for round in $rounds; do
      for variant in $variants; do
        for side in $(sides_of "$round"); do
          rm -rf "$work/out"
          export_run platforms "$shape shape, --platform $variant" "$side" "$round" "$work/out" \
            --base-url "$base" --public-url "http://127.0.0.1:$port/" --platform "$variant"
        done
      done
    done
    rm -rf "$work/out"
    stop_all
  done
}

# --- the run --------------------------------------------------------------------------------------
for b in harvest profiles incremental serve load platforms; do
  if selected "$b"; then "${b}_bench"; fi
done

command=""
for knob in ROUNDS WARMUP ONLY RECORDS PROFILE_RUNS SERVE_DURATION LOAD_DURATION LOAD_WARMUP PORT STRICT; do
  value=${!knob}
  case $knob=$value in
    ROUNDS=3 | WARMUP=1 | ONLY=harvest,profiles,incremental,serve,load | RECORDS= | \
      "PROFILE_RUNS=plain profiles lists gw-plain gw-profiles" | SERVE_DURATION=8 | LOAD_DURATION=60 | \
      LOAD_WARMUP=10 | PORT=18860 | STRICT=0) ;;
    *) command+="$knob=$(printf %q "$value") " ;;
  esac
done
command+="bash benches/compare.sh $(git rev-parse --short "$base") $(git rev-parse --short "$after")"
machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(free -g | awk '/^Mem:/ { print $2 " GB" }') memory; Linux $(uname -r); $(rustc --version 2>/dev/null || echo rustc unknown)"
export META_BASE=$base META_AFTER=$after META_COMMAND=$command META_MACHINE=$machine \
  META_STARTED=$started META_ENDED=$(date -u '+%Y-%m-%d %H:%M UTC') META_LOAD_START=$load_start \
  META_LOAD_END=$(cut -d' ' -f1 /proc/loadavg) META_ROUNDS=$ROUNDS META_WARMUP=$WARMUP
META_BASE_SUBJECT=$(git log -1 --format=%s "$base" | cut -c1-160)
META_AFTER_SUBJECT=$(git log -1 --format=%s "$after" | cut -c1-160)
export META_BASE_SUBJECT META_AFTER_SUBJECT
status=0
python3 - "$work/figures.tsv" "$work/checks.tsv" "$STRICT" <<'PY' >benches/compare-RESULTS.md || status=$?
import os, statistics, sys
figures, checks, strict = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
meta = {k[5:].lower(): v for k, v in os.environ.items() if k.startswith("META_")}
order, values = [], {}
for line in open(figures):
    bench, figure, kind, rnd, side, value = line.rstrip("\n").split("\t")
    key = (bench, figure)
    if key not in values:
        order.append(key)
        values[key] = {"kind": kind, "before": [], "after": []}
    if rnd != "0" and value != "":
        values[key][side].append(float(value))
results = {}
for line in open(checks):
    bench, what, ok, detail = line.rstrip("\n").split("\t")
    r = results.setdefault((bench, what), {"ok": True, "detail": detail, "n": 0})
    r["n"] += 1
    if ok != "1" and r["ok"]:
        r["ok"], r["detail"] = False, detail

def fmt(x):
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3f}" if abs(x) < 1 else f"{x:.2f}"
def side(v):
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{fmt(m)} ({fmt(min(v))}-{fmt(max(v))})" if len(v) > 1 else fmt(m)

out = [f"# Before/after comparison: {meta['base'][:7]} vs {meta['after'][:7]}\n"]
out.append(f"- before: `{meta['base']}` {meta['base_subject']}")
out.append(f"- after: `{meta['after']}` {meta['after_subject']}")
out.append(f"- {meta['rounds']} rounds, the two binaries alternating in each, `before` first in even"
           " rounds and in the first, `after` in the others"
           + (", after one uncounted round" if meta["warmup"] == "1" else "")
           + "; medians, with the lowest and highest run in brackets")
out.append(f"- machine: {meta['machine']}; load average {meta['load_start']} at the start, "
           f"{meta['load_end']} at the end")
out.append(f"- run from {meta['started']} to {meta['ended']}\n")
out.append(f"Reproduce with:\n\n```sh\n{meta['command']}\n```\n")
outside, bench_now = [], None
out.append("| benchmark | figure | before | after | after/before | within ±5% |")
out.append("| --- | --- | ---: | ---: | ---: | --- |")
for key in order:
    bench, figure = key
    v = values[key]
    b, a = v["before"], v["after"]
    if b and a and statistics.median(b) > 0:
        ratio = statistics.median(a) / statistics.median(b)
        r = f"{ratio:.3f}"
    else:
        ratio, r = None, "-"
    if v["kind"] == "info":
        verdict = "info"
    elif ratio is None:
        verdict = "no figure"
    elif abs(ratio - 1) <= 0.05:
        verdict = "yes"
    else:
        verdict = "**NO**"
        outside.append(f"{bench}: {figure} ({r})")
    out.append(f"| {bench if bench != bench_now else ''} | {figure} | {side(b)} | {side(a)} | {r} | {verdict} |")
    bench_now = bench
out.append("")
if outside:
    out.append(f"**Outside ±5%**: {'; '.join(outside)}.\n")
else:
    out.append("Every gated figure is within ±5% of before's.\n")
failed = [k for k, r in results.items() if not r["ok"]]
out.append("| benchmark | behaviour check | |\n| --- | --- | --- |")
for (bench, what), r in results.items():
    out.append(f"| {bench} | {what} | {'pass' if r['ok'] else '**FAIL**: ' + r['detail']} |")
out.append("\nCPU s is user + system CPU-seconds (GNU time for exports; /proc for a gateway, from its "
           "start until its files answer); wall s is the elapsed time. Serving: wrk's requests/s "
           "at saturation, p99 under a fixed load (each connection waits a fixed delay between "
           "requests, the same for both binaries). \"info\" figures are not flagged. "
           "See benches/compare.sh for what each benchmark runs.")
print("\n".join(out))
sys.exit(1 if failed else 3 if strict and outside else 0)
PY
cat benches/compare-RESULTS.md
exit "$status"
