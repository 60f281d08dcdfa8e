#!/usr/bin/env bash
# Profiles benchmark (issue 4, point 11): what rendering every profile adds to a plain sitemap
# export of the same 1,000,000 records. The benchmark upstream serves the records with https
# landing pages (--https-identifiers), so that DiWoo publishes too; every export gets the same
# --scope. Runs alternate, ROUNDS times:
#   plain     the sitemap alone
#   profiles  + Signmap, OCX and DiWoo with five categories (every XML profile)
# and once at the end
#   lists     + CDIF's metadata lists (the JSON-LD documents in ItemLists: a few files)
#   all       + CDIF as well (its export writes a JSON-LD file per record)
#   files     the peer of `all`'s file per record: a Python loop creating as many files of the
#             same sizes in one folder (open, write, close each; one sync at the end), what
#             any tool publishing a file per record pays at least
# Each run is timed with GNU time (user and system CPU-seconds, peak RSS, minor faults). As root,
# the page cache is dropped before each run, so that every run starts from the same free memory
# (without it the kernel's cost of finding pages for a gigabyte of output varies from run to run).
# Writes benches/profiles/RESULTS.md (and prints it).
#
#   bash benches/profiles/run.sh
#
# Then, alternating GATEWAY_ROUNDS times, the gateway's first refresh of the same records, plain
# and with the same profiles (`serve`: harvested through its store, each file stored plain and
# gzipped).
# Knobs (environment): RECORDS (1000000), ROUNDS (3), GATEWAY_ROUNDS (3), PORT (18790, and the
# next port for the gateway), STRICT=1 (exit 3 when a target is missed: the XML profiles at most
# 1.5x the plain export's CPU, CDIF's lists at most 2.5x, CDIF's file per record within 1.2x of
# a peer that only creates as many files).
# Loopback only; everything it writes stays under target/bench-profiles/.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-1000000}
ROUNDS=${ROUNDS:-3}
GATEWAY_ROUNDS=${GATEWAY_ROUNDS:-3}
PORT=${PORT:-18790}
STRICT=${STRICT:-0}
work=target/bench-profiles
bin=$work/oai-bridge
server_bin=target/bench-server/release/oai-bench-server
mkdir -p "$work"
# One run at a time: two would share the port, the folders and the CPU.
exec 9>"$work/lock"
flock -n 9 || { echo "another profiles benchmark is running" >&2; exit 1; }
# shellcheck source=benches/lib.sh
source benches/lib.sh

install_missing /usr/bin/time:time curl:curl bc:bc
build_binaries

log "starting the upstream: $RECORDS records, https landing pages"
"$server_bin" --records "$RECORDS" --page-size 500 --port "$PORT" --https-identifiers \
  >"$work/server.log" 2>&1 &
pids+=($!)
wait_port "$PORT" "${pids[-1]}" "$work/server.log"

diwoo=()
for i in 0 1 2 3 4; do diwoo+=(--diwoo "com_$i=$((i + 1))"); done
declare -A flags=(
  [plain]=""
  [profiles]="--signmap --ocx ${diwoo[*]}"
  [lists]="--signmap --ocx --cdif-list ${diwoo[*]}"
  [all]="--signmap --ocx --cdif ${diwoo[*]}"
)

: >"$work/times.tsv"
run() { # KIND ROUND
  local out=$work/out-$1
  rm -rf "$out"
  sync
  if [ "$(id -u)" = 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
  # shellcheck disable=SC2086
  timeout 1800 /usr/bin/time -o "$work/time" -f "%U\t%S\t%M\t%R" "$bin" export \
    --base-url "http://127.0.0.1:$PORT/oai/request" --public-url "https://127.0.0.1:$PORT/oai/" \
    --scope "https://127.0.0.1:$PORT/oai/" --out "$out" --no-progress -q ${flags[$1]} \
    >"$work/$1.stdout"
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$(cat "$work/time")" "$(du -sb "$out" | cut -f1)" \
    >>"$work/times.tsv"
  log "$1 (round $2): $(cut -f1-4 "$work/time" | tr '\t' ' ') (user s, sys s, KB, faults)"
  if [ "$1" = all ]; then
    find "$out/cdif" -type f -printf '%s\n' >"$work/sizes"
    rm -rf "$out" "$work/out-files"
    mkdir "$work/out-files"
    sync
    if [ "$(id -u)" = 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
    /usr/bin/time -o "$work/time" -f "%U\t%S\t%M\t%R" python3 -c '
import os, sys
folder = os.open(sys.argv[2], os.O_RDONLY)
filler = b"x" * (1 << 20)
for i, size in enumerate(open(sys.argv[1])):
    fd = os.open(f"{i * 0x9E3779B97F4A7C15 % 2**64:016x}.jsonld",
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=folder)
    os.write(fd, filler[:int(size)])
    os.close(fd)
os.sync()
' "$work/sizes" "$work/out-files"
    printf '%s\t%s\t%s\t%s\n' files "$2" "$(cat "$work/time")" "$(du -sb "$work/out-files" | cut -f1)" \
      >>"$work/times.tsv"
    log "files: $(cut -f1-4 "$work/time" | tr '\t' ' ') (user s, sys s, KB, faults)"
    rm -rf "$work/out-files"
  fi
  rm -rf "$out"
}
# The gateway's first refresh of the same records (a full harvest through its store, every file
# stored plain and gzipped): CPU-seconds from the start of `serve` until its sitemap index
# answers, read from /proc; the process is then stopped.
gateway() { # KIND ROUND
  local dir=$work/gw-$1 kind=${1#gw-} pid
  rm -rf "$dir"
  mkdir -p "$dir"
  {
    printf '[server]\nlisten = "127.0.0.1:%s"\nstate_dir = "%s/state"\n' "$((PORT + 1))" "$PWD/$dir"
    printf '[[repository]]\nname = "bench"\nbase_url = "http://127.0.0.1:%s/oai/request"\n' "$PORT"
    printf 'scope = ["https://127.0.0.1:%s/oai/"]\n' "$PORT"
    if [ "$kind" = profiles ]; then
      printf 'signmap = true\ndiwoo = { %s }\n[repository.ocx]\nenabled = true\n' \
        "$(for i in 0 1 2 3 4; do printf '"com_%s" = %s, ' "$i" "$((i + 1))"; done | sed 's/, $//')"
    fi
  } >"$dir/bridge.toml"
  sync
  if [ "$(id -u)" = 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
  "$bin" serve --config "$dir/bridge.toml" --log-format json >"$dir/log" 2>&1 &
  pid=$!
  local waited=0
  until curl -sf -o /dev/null "http://127.0.0.1:$((PORT + 1))/bench/sitemap.xml"; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/log" >&2; log "the gateway exited"; exit 1; }
    ((waited++ < 9000)) || { kill "$pid"; log "no generation after 1800 s"; exit 1; }
    sleep 0.2
  done
  local tck user sys hwm
  tck=$(getconf CLK_TCK)
  read -r user sys < <(awk '{print $14, $15}' "/proc/$pid/stat")
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  printf '%s\t%s\t%s\t%s\t%s\t0\t%s\n' "gw-$kind" "$2" "$(echo "scale=2; $user / $tck" | bc)" \
    "$(echo "scale=2; $sys / $tck" | bc)" "$hwm" "$(du -sb "$dir/state" | cut -f1)" >>"$work/times.tsv"
  log "gateway $kind (round $2): $(tail -1 "$work/times.tsv" | cut -f3-5 | tr '\t' ' ') (user s, sys s, KB)"
  rm -rf "$dir"
}
# One run of each, not counted: the first runs after a build or a server start varied most.
run plain 0
run profiles 0
for round in $(seq "$ROUNDS"); do
  run plain "$round"
  run profiles "$round"
done
gateway gw-plain 0
gateway gw-profiles 0
for round in $(seq "$GATEWAY_ROUNDS"); do
  gateway gw-plain "$round"
  gateway gw-profiles "$round"
done
run lists 1
run all 1
cat "$work/profiles.stdout" >&2

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
status=0
python3 - "$work/times.tsv" "$rev" "$RECORDS" "$STRICT" >benches/profiles/RESULTS.md <<'PY' || status=$?
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
rev, records, strict = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
runs = {}
for kind, rnd, user, sys_, rss, faults, size in rows:
    if rnd == "0":
        continue
    runs.setdefault(kind, []).append((float(user), float(sys_), int(rss), int(faults), int(size)))
def med(kind, i):
    return statistics.median(r[i] for r in runs[kind])
def cpu(kind):
    return statistics.median(r[0] + r[1] for r in runs[kind])
print(f"# Profiles benchmark at {rev}\n")
print(f"Exports of the same {records:,} records (benchmark upstream, https landing pages), "
      "each timed with GNU time after the page cache was dropped; plain and profiles "
      "alternate, the figures are medians.\n")
print("| export | runs | user s | sys s | CPU s | x plain | peak RSS | minor faults | bytes written |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for kind, label in [("plain", "plain sitemap"), ("profiles", "+ Signmap, OCX, DiWoo x5"),
                    ("lists", "+ CDIF lists"), ("all", "+ CDIF documents"),
                    ("files", "peer: as many files, Python")]:
    if kind not in runs:
        continue
    print(f"| {label} | {len(runs[kind])} | {med(kind, 0):.2f} | {med(kind, 1):.2f} | "
          f"{cpu(kind):.2f} | **{cpu(kind) / cpu('plain'):.2f}x** | "
          f"{med(kind, 2) / 1024:.0f} MiB | {med(kind, 3):,.0f} | {med(kind, 4):,.0f} |")
# The targets (the owner's decision on issue 4's point 11, issue 21): the XML profiles at most
# 1.5x the plain export's CPU; CDIF's lists at most 2.5x; CDIF's file per record within 1.2x of
# a peer that only creates as many files of the same sizes.
targets = []
ratio = cpu("profiles") / cpu("plain")
user = med("profiles", 0) / med("plain", 0)
targets.append(("Signmap, OCX, DiWoo x5", f"{ratio:.2f}x the plain export", "at most 1.5x",
                ratio <= 1.5))
print(f"\nEvery XML profile adds **{(ratio - 1) * 100:.0f}%** CPU to the plain export "
      f"({user:.2f}x in user time alone).")
if "lists" in runs:
    lists = cpu("lists") / cpu("plain")
    targets.append(("+ CDIF lists", f"{lists:.2f}x the plain export", "at most 2.5x", lists <= 2.5))
    print(f"With CDIF's JSON-LD as well (in lists: {runs['lists'][0][4] / runs['plain'][0][4]:.1f} "
          f"times the plain export's bytes) the profiles add **{(lists - 1) * 100:.0f}%**.")
if "all" in runs and "files" in runs:
    files = cpu("all") / cpu("files")
    targets.append(("+ CDIF documents, a file each", f"{files:.2f}x the peer's file creation",
                    "within 1.2x", files <= 1.2))
    # One run each, and the file system's cost of a file varies from run to run by a fifth.
    print(f"\nCDIF's file per record: the export with CDIF documents takes {cpu('all'):.2f} CPU-s; "
          f"creating as many files of the same sizes, and nothing else, takes {cpu('files'):.2f} "
          f"in the same run ({files:.2f}x that: one run each, and what a file "
          "costs the file system varies from run to run by a fifth).")
print("\n| target | measured | bound | |\n| --- | --- | --- | --- |")
for what, measured, bound, met in targets:
    print(f"| {what} | {measured} | {bound} | **{'met' if met else 'not met'}** |")
if "gw-plain" in runs and "gw-profiles" in runs:
    print("\nThe gateway's first refresh of the same records (`serve`, from its start until the "
          "sitemap index answers: a full harvest through its store, every file stored plain "
          "and gzipped; medians):\n")
    print("| gateway refresh | runs | user s | sys s | CPU s | x plain | peak RSS | state bytes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind, label in [("gw-plain", "plain sitemap"), ("gw-profiles", "+ Signmap, OCX, DiWoo x5")]:
        print(f"| {label} | {len(runs[kind])} | {med(kind, 0):.2f} | {med(kind, 1):.2f} | "
              f"{cpu(kind):.2f} | **{cpu(kind) / cpu('gw-plain'):.2f}x** | "
              f"{med(kind, 2) / 1024:.0f} MiB | {med(kind, 4):,.0f} |")
    gw = cpu("gw-profiles") / cpu("gw-plain")
    print(f"\nIn the gateway the XML profiles add **{(gw - 1) * 100:.0f}%** to the plain refresh: "
          "the store keeps each record's Dublin Core fields for them (about a kilobyte instead "
          f"of its URLs), and {med('profiles', 4) / med('plain', 4):.1f} times the bytes are "
          "gzipped.")
print("\nEach run, in order (user s, sys s, peak KB, minor faults, bytes; round 0 is the "
      "uncounted warm-up):\n")
for r in rows:
    print(f"- {r[0]} {r[1]}: {r[2]} {r[3]} {r[4]} {r[5]} {r[6]}")
if strict and not all(met for *_, met in targets):
    sys.exit(3)
PY
cat benches/profiles/RESULTS.md
exit "$status"
