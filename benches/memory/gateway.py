"""The helper of benches/memory/gateway.sh.

usage: gateway.py sample ADMIN_PORT OUT STOP_FILE   (samples /metrics until STOP_FILE exists)
       gateway.py hashes GATEWAY_PORT REPOS         (SHA-256 of every file served)
       gateway.py report WORK DESCRIBE REPOS RECORDS PROFILES BUDGETS
"""

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
import urllib.request

LINE = re.compile(r'^(oai_bridge_[a-z_]+)(\{repository="([^"]*)"\})? (\d+)$')
WANTED = {
    "oai_bridge_refresh_memory_bytes",
    "oai_bridge_refresh_spill_bytes",
    "oai_bridge_refreshes_memory_bytes",
    "oai_bridge_refreshes_spill_bytes",
    "oai_bridge_memory_budget_bytes",
    "oai_bridge_refreshes_running",
}


def get(url):
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read()


def sample(admin, out, stop):
    """A line per scrape: seconds, then name[repository]=value of each wanted gauge."""
    started = time.time()
    with open(out, "w") as f:
        while not os.path.exists(stop):
            try:
                text = get(f"http://127.0.0.1:{admin}/metrics").decode()
            except OSError:
                time.sleep(0.25)
                continue
            values = []
            for line in text.splitlines():
                m = LINE.match(line)
                if m and m.group(1) in WANTED:
                    key = m.group(1) + (f"[{m.group(3)}]" if m.group(3) else "")
                    values.append(f"{key}={m.group(4)}")
            f.write(f"{time.time() - started:.2f}\t" + "\t".join(values) + "\n")
            f.flush()
            time.sleep(0.25)


def hashes(port, repos):
    """Each repository's index and shards, by path, with their SHA-256."""
    base = f"http://127.0.0.1:{port}"
    for i in range(int(repos)):
        for index in ("sitemap.xml", "signmap.xml"):
            path = f"/r{i}/{index}"
            try:
                body = get(base + path)
            except OSError:
                continue  # no Signmap without PROFILES=1
            # An index's lastmods are its generation's time: its list of shards is compared.
            listed = re.findall(rb"<loc>([^<]+)</loc>", body)
            print(path, "(its shards)", hashlib.sha256(b"\n".join(listed)).hexdigest())
            for loc in listed:
                shard = "/" + loc.decode().split("/", 3)[3]
                print(shard, hashlib.sha256(get(base + shard)).hexdigest())


def mib(n):
    return f"{int(n) / 1048576:,.1f} MiB"


def report(work, describe, repos, records, profiles, budgets):
    runs = {}
    for line in open(os.path.join(work, "runs.tsv")):
        budget, wall, hwm_kb, state = line.rstrip("\n").split("\t")
        runs[budget] = dict(wall=float(wall), hwm=int(hwm_kb) * 1024, state=int(state))
    budgets = budgets.split()
    # The shards' bytes, and the list of shards of each index (not its lastmods).
    digests = {
        b: "".join(
            line for line in open(os.path.join(work, f"run-{b}", "hashes.txt"))
            if not line.split()[0].endswith(("/sitemap.xml", "/signmap.xml")) or "(its shards)" in line
        )
        for b in runs
    }
    same = len(set(digests.values())) == 1
    files = len(next(iter(digests.values())).splitlines()) if digests else 0
    print("# Gateway memory benchmark results\n")
    print(f"`benches/memory/gateway.sh`: {repos} repositories of {int(records):,} records each "
          f"({'the sitemap and the Signmap' if profiles == '1' else 'the sitemap alone'}), "
          "each served by its own `benches/harvest/server --on-demand` (500 records a page, "
          "about 2.1 KB of oai_dc each), refreshed at once by one `oai-bridge serve` "
          f"(max_concurrent_refreshes = {repos}, start_spread_secs = 0) from an empty state "
          "directory, once for each `[server] memory_budget_bytes`. *default*: the key left "
          f"out, {repos} x `[harvest] memory_budget_bytes` (192 MiB). /metrics sampled every "
          "0.25 s during the refreshes; the history's figures are the most each refresh's "
          "collectors held (as the budget counts them) and its spill files took. A collector "
          "counts its memory in steps of up to 64 KiB, so the sum may pass the budget by that "
          "much a collector; the column of samples over the budget says by how much at most.\n")
    print("| memory_budget_bytes | published after | gateway peak RSS | most held together "
          "(/metrics) | most spilled together (/metrics) | samples over the budget | "
          "each refresh: most held / spilled (history) | state on disk |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for b in budgets:
        if b not in runs:
            continue
        r = runs[b]
        held = spilled = over = most_over = 0
        budget = None
        for line in open(os.path.join(work, f"run-{b}", "samples.tsv")):
            values = dict(v.split("=") for v in line.rstrip("\n").split("\t")[1:] if "=" in v)
            m = int(values.get("oai_bridge_refreshes_memory_bytes", 0))
            held = max(held, m)
            spilled = max(spilled, int(values.get("oai_bridge_refreshes_spill_bytes", 0)))
            budget = int(values.get("oai_bridge_memory_budget_bytes", budget or 0))
            over += m > (budget or m)
            most_over = max(most_over, m - (budget or m))
        each = []
        for line in open(os.path.join(work, f"run-{b}", "history.tsv")):
            name, entry = line.rstrip("\n").split("\t", 1)
            e = json.loads(entry)
            each.append(f"{name}: {mib(e.get('memory', 0))} / {mib(e.get('spilled', 0))}")
        label = "default" if b == "default" else f"{int(b):,} ({mib(b)})"
        print(f"| {label} | {r['wall']:.1f} s | {mib(r['hwm'])} | {mib(held)} | {mib(spilled)} "
              f"| {over} (by {most_over / 1024:,.0f} KiB at most) | {'; '.join(each)} | {r['state'] / 1e6:,.0f} MB |")
    print(f"\nFiles served ({files}: every shard's bytes, every index's list of shards): "
          f"{'byte-identical in every run' if same else 'DIFFERENT between runs'}.\n")
    cpu = platform.processor() or platform.machine()
    load = open("/proc/loadavg").read().split()[:3]
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"Build {describe}; {os.cpu_count()} cores ({cpu}), load average at the end "
          f"{' '.join(load)}; {rustc}.")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"sample": sample, "hashes": hashes, "report": report}[command](*args)
