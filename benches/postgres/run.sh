#!/usr/bin/env bash
# State-store benchmark (issue 23, point 5): a full refresh of a 1,000,000-record repository
# through the SQLite store (`export --state DIR`) and through the PostgreSQL store (`export
# --state-url URL`, a fresh database on a local PostgreSQL started by .ci/postgres.sh), then the
# incremental refresh after 1% of the records changed, on both. Reports the exporting process's
# CPU-seconds (GNU time) and, for PostgreSQL, the server's too (its postmaster and backends,
# from /proc), with the ratios to SQLite; and checks both stores publish the same sitemaps.
#
#   bash benches/postgres/run.sh        # about 6 minutes; writes benches/postgres/RESULTS.md
#
# Knobs: RECORDS (1000000), PAGE_SIZE (500), PORT (18780). Loopback only; everything it writes
# stays under target/bench-postgres/ (and the server's temporary folder, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-1000000}
PAGE_SIZE=${PAGE_SIZE:-500}
PORT=${PORT:-18780}
work=target/bench-postgres
bin=$work/oai-bridge
base_url="http://127.0.0.1:$PORT/oai/request"
public_url="http://127.0.0.1:$PORT/oai/"
rm -rf "$work"
mkdir -p "$work"
# shellcheck source=benches/lib.sh
source benches/lib.sh
pg_dir=
stop_pg() { [ -z "$pg_dir" ] || .ci/postgres.sh stop "$pg_dir"; cleanup; }
trap stop_pg EXIT INT TERM

install_missing /usr/bin/time:time
build_binaries

log "starting PostgreSQL"
pg_url=$(.ci/postgres.sh 2>"$work/pg-dir")
pg_dir=$(cat "$work/pg-dir")
db_url="${pg_url%/postgres}/bench"
# A database of its own, with the server's psql.
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
"$bindir/psql" "$pg_url" -q -c "CREATE DATABASE bench" -c "ALTER SYSTEM SET autovacuum = off" \
  -c "SELECT pg_reload_conf()" >/dev/null
postmaster=$(head -1 "$pg_dir/data/postmaster.pid")
# CPU ticks of the PostgreSQL server: the postmaster, its reaped children, its live children.
pg_ticks() {
  local total=0 pid
  for pid in $postmaster $(pgrep -P "$postmaster"); do
    [ -r "/proc/$pid/stat" ] || continue
    total=$((total + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat")))
  done
  echo "$total"
}
upstream() { start_upstream "$PORT" --records "$RECORDS" --page-size "$PAGE_SIZE" "$@"; }

# The server's own processes (checkpointer, WAL writer...): a connection's backend is a child
# that comes and goes, and its CPU counts in the postmaster's only once it is reaped.
resident=$(pgrep -P "$postmaster" | sort)
settle() {
  local waited=0
  until [ "$(pgrep -P "$postmaster" | sort)" = "$resident" ]; do
    ((waited++ < 600)) || { log "PostgreSQL's backends did not end"; exit 1; }
    sleep 0.1
  done
}

# timed NAME ARGS...: an export under GNU time, and the PostgreSQL server's CPU ticks meanwhile
# (until its backend ended), then those of the VACUUM (ANALYZE) that autovacuum would run later
# on what the export wrote (counted apart: autovacuum is off on this server so that it does not
# run at a moment the measurement misses).
timed() {
  local name=$1
  shift
  local before
  settle
  before=$(pg_ticks)
  timeout 3600 /usr/bin/time -v -o "$work/$name.time" "$bin" export --base-url "$base_url" \
    --public-url "$public_url" --no-progress "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" \
    || { echo "$name failed:" >&2; tail -20 "$work/$name.stderr" >&2; exit 1; }
  settle
  echo $(($(pg_ticks) - before)) >"$work/$name.pg-ticks"
  before=$(pg_ticks)
  case $name in pg-*) "$bindir/psql" "$db_url" -q -c "VACUUM (ANALYZE)" ;; esac
  settle
  echo $(($(pg_ticks) - before)) >"$work/$name.vacuum-ticks"
}

log "full refresh: $RECORDS records"
upstream
timed sqlite-full --out "$work/sqlite-out" --state "$work/sqlite-state"
timed pg-full --out "$work/pg-out" --state-url "$db_url"
stop_upstream
log "incremental refresh: 1% of the records changed"
upstream --changed-every 100 --response-date 2025-10-01T00:00:00Z
timed sqlite-incremental --out "$work/sqlite-out" --state "$work/sqlite-state"
timed pg-incremental --out "$work/pg-out" --state-url "$db_url"
stop_upstream
same=yes
diff -r "$work/sqlite-out" "$work/pg-out" >/dev/null || same=no

python3 - "$work" "$RECORDS" "$(getconf CLK_TCK)" "$same" <<'PY' | tee benches/postgres/RESULTS.md
import re, sys
work, records, hz, same = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def cpu(name):
    text = open(f"{work}/{name}.time").read()
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", text).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", text).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024
    pg = int(open(f"{work}/{name}.pg-ticks").read()) / hz
    vacuum = int(open(f"{work}/{name}.vacuum-ticks").read()) / hz
    return user + system, pg, vacuum, wall, rss

print("# State-store benchmark results\n")
print(f"A {records:,}-record repository (`benches/harvest/server`): a full refresh through each store, then "
      "the incremental refresh after 1% of the records changed (every 100th; half updated, half deleted). "
      "PostgreSQL 15 on the same machine (loopback; `fsync=off`, `synchronous_commit=off` as .ci/postgres.sh "
      "starts it; autovacuum off, and instead a `VACUUM (ANALYZE)` after each export, counted). The "
      "server's CPU is its processes' while the export ran, its backend included once it ended. "
      "Reproduce with `bash benches/postgres/run.sh`.\n")
print("| run | bridge CPU-s | PostgreSQL server CPU-s | its VACUUM (ANALYZE) after | total CPU-s | wall | bridge peak RSS (MiB) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
rows = {}
for name in ["sqlite-full", "pg-full", "sqlite-incremental", "pg-incremental"]:
    c, pg, vacuum, wall, rss = cpu(name)
    rows[name] = (c, pg + vacuum)
    print(f"| {name} | {c:.2f} | {pg:.2f} | {vacuum:.2f} | {c + pg + vacuum:.2f} | {wall} | {rss:.0f} |")
full_bridge = rows["pg-full"][0] / rows["sqlite-full"][0]
full_total = sum(rows["pg-full"]) / rows["sqlite-full"][0]
print()
print("| target | measured | verdict |")
print("| --- | --- | --- |")
print(f"| full refresh with PostgreSQL within 2x the CPU of SQLite (the bridge's) | {full_bridge:.2f}x | "
      f"{'**pass**' if full_bridge <= 2 else '**fail**'} |")
print(f"| the same, counting the PostgreSQL server's CPU too (with the VACUUM) | {full_total:.2f}x | "
      f"{'**pass**' if full_total <= 2 else '**fail**'} |")
print(f"| both stores publish the same sitemaps | {'identical folders' if same == 'yes' else 'the folders differ'} | "
      f"{'**pass**' if same == 'yes' else '**fail**'} |")
PY
