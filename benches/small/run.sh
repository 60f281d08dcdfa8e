#!/usr/bin/env bash
# Small-records benchmark (issue 30 point 4): oai-bridge and Sickle (with lxml) harvest, in the
# same run and alternately, a repository of 200,000 small oai_dc records (a few hundred bytes each)
# answered by a third-party OAI-PMH server: `oai_repo` from PyPI (benches/small/server.py, which
# has it make every answer once at start, so its Python does not pace the harvesters). Reports
# each harvester's records per CPU-second (user + system time of its process, GNU time) and the
# ratio, against the target of 20x Sickle's, and checks that both found the same URL set. Writes
# benches/small/RESULTS.md (and prints it).
#
#   bash benches/small/run.sh
#
# Knobs (environment): RECORDS (200000), PAGE_SIZE (500), ROUNDS (3; the medians count),
# PORT (18766), STRICT=1 (exit 3 when the target is missed). Loopback only; everything it
# writes stays under target/ (target/bench-small/ for the run's files).
set -euo pipefail
cd "$(dirname "$0")/../.."

RECORDS=${RECORDS:-200000}
PAGE_SIZE=${PAGE_SIZE:-500}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18766}
STRICT=${STRICT:-0}
OAI_REPO_VERSION=0.5.2
SICKLE_VERSION=0.7.0
LXML_VERSION=6.1.3

work=$(pwd)/target/bench-small
bin=$work/oai-bridge
venv=target/bench-small-venv
base_url="http://127.0.0.1:$PORT/oai/request"
# shellcheck source=benches/lib.sh
. benches/lib.sh

install_missing /usr/bin/time:time
if ! "$venv/bin/python" -c "import oai_repo, sickle, lxml" 2>/dev/null; then
  log "creating $venv with oai_repo $OAI_REPO_VERSION, Sickle $SICKLE_VERSION and lxml $LXML_VERSION"
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install -q "oai-repo==$OAI_REPO_VERSION" \
    "sickle==$SICKLE_VERSION" "lxml==$LXML_VERSION"
fi
versions=$("$venv/bin/python" - <<'PY'
import importlib.metadata as m
import lxml.etree as e
libxml2 = ".".join(map(str, e.LIBXML_VERSION))
print(f"oai_repo {m.version('oai_repo')}; peer Sickle {m.version('sickle')}, lxml {m.version('lxml')} (libxml2 {libxml2})")
PY
)

rm -rf "$work"
mkdir -p "$work"
log "building oai-bridge (release, working tree)"
timeout 1800 cargo build --release --locked --bin oai-bridge
cp target/release/oai-bridge "$bin"
describe="$(git rev-parse --short HEAD)"
if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock)" ]; then
  describe="$describe with uncommitted changes to src/ or Cargo.*"
fi

log "oai_repo makes the answers for $RECORDS records, $PAGE_SIZE a page"
"$venv/bin/python" benches/small/server.py "$PORT" "$RECORDS" "$PAGE_SIZE" >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
pids+=("$server_pid")
waited=0
until grep -q ready "$work/server.out" 2>/dev/null; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$work/server.log" >&2
    log "the server exited before listening"
    exit 1
  fi
  if ((waited >= 6000)); then log "the server was not ready within 600 s"; exit 1; fi
  sleep 0.1
  waited=$((waited + 1))
done

# timed NAME CMD...: CMD under GNU time into $work/NAME.time, with the load average at its start.
timed() {
  local name=$1
  shift
  cut -d' ' -f1 /proc/loadavg >"$work/load-$name"
  timeout 3600 /usr/bin/time -v -o "$work/$name.time" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" \
    || { log "$name failed"; tail -n 20 "$work/$name.stderr" >&2; exit 1; }
}

# A warm-up of each, uncounted, then ROUNDS alternating pairs.
for round in $(seq 0 "$ROUNDS"); do
  log "round $round: oai-bridge export"
  rm -rf "$work/ours-out"
  timed "ours-$round" "$bin" export --base-url "$base_url" --out "$work/ours-out" \
    --public-url "http://127.0.0.1:$PORT/oai/" --no-progress -q
  log "round $round: Sickle"
  timed "peer-$round" "$venv/bin/python" benches/harvest/peer_sickle.py "$base_url" "$work/peer.urls"
done
python3 benches/harvest/sitemap_urls.py "$work/ours-out" "$work/ours.urls"

python3 - "$work" "$RECORDS" "$ROUNDS" "$describe" "$versions" "$STRICT" <<'PY'
import os, re, statistics, subprocess, sys
work, records, rounds, describe, versions, strict = sys.argv[1:]
records, rounds = int(records), int(rounds)

def cpu(name):
    text = open(f"{work}/{name}.time").read()
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", text).group(1))
    sys_ = float(re.search(r"System time \(seconds\): ([\d.]+)", text).group(1))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    return user, sys_, rss

rows = {who: [cpu(f"{who}-{r}") for r in range(1, rounds + 1)] for who in ("ours", "peer")}
loads = [open(f"{work}/load-{who}-{r}").read().strip() for r in range(1, rounds + 1) for who in ("ours", "peer")]
med = {who: statistics.median(u + s for u, s, _ in rows[who]) for who in rows}
rss = {who: max(r for _, _, r in rows[who]) / 1024 for who in rows}
rate = {who: records / med[who] for who in med}
ratio = rate["ours"] / rate["peer"]
ours_urls = open(f"{work}/ours.urls").read().split()
peer_urls = open(f"{work}/peer.urls").read().split()
same = ours_urls == peer_urls and len(ours_urls) == records
machine = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
lines = [
    "# Small-records benchmark results",
    "",
    f"{records:,} records of a few hundred bytes of oai_dc each (a title, a creator, a date, a type, "
    "a landing page and a URN), 500 a page, answered by a third-party OAI-PMH server: "
    f"{versions.split(';')[0]} (benches/small/server.py; every answer made once at start, then "
    "served from memory). oai-bridge at " + describe + f"; {versions.split('; ')[1]}. "
    f"Machine: {machine}, {os.cpu_count()} cores.",
    "",
    "Reproduce with:",
    "",
    "```sh",
    "bash benches/small/run.sh",
    "```",
    "",
    f"Medians of {rounds} rounds, the two harvesters alternating (after an uncounted warm-up of each); "
    "CPU-seconds are the harvesting process's user + system time (GNU time), start to exit, "
    "oai-bridge's including writing its sitemaps. Load averages (1 min) at each start: "
    + ", ".join(loads) + ".",
    "",
    "| | oai-bridge (release) | peer: Sickle + lxml | ours vs peer |",
    "| --- | ---: | ---: | ---: |",
    f"| CPU-seconds, user + sys (median) | {med['ours']:.2f} | {med['peer']:.2f} | |",
    f"| records per CPU-second | {rate['ours']:,.0f} | {rate['peer']:,.0f} | **{ratio:.1f}x** |",
    f"| peak RSS (MiB) | {rss['ours']:.1f} | {rss['peer']:.1f} | {rss['ours'] / rss['peer']:.2f}x |",
    f"| URLs found | {len(ours_urls):,} | {len(peer_urls):,} | {'identical' if ours_urls == peer_urls else 'DIFFERENT'} |",
    "",
    "Each round (user s + sys s): "
    + "; ".join(f"ours {u:.2f} + {s:.2f}, peer {pu:.2f} + {ps:.2f}"
                for (u, s, _), (pu, ps, _) in zip(rows["ours"], rows["peer"])) + ".",
    "",
    "| target | measured | verdict |",
    "| --- | --- | --- |",
    f"| at least 20x the peer's records per CPU-second | {ratio:.1f}x | **{'pass' if ratio >= 20 else 'FAIL'}** |",
    f"| identical URL sets, one per record | {len(ours_urls):,} vs {len(peer_urls):,} | **{'pass' if same else 'FAIL'}** |",
    "",
]
text = "\n".join(lines)
open("benches/small/RESULTS.md", "w").write(text)
print(text)
if strict == "1" and (ratio < 20 or not same):
    sys.exit(3)
PY
