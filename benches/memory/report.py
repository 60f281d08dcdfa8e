"""Writes benches/memory/RESULTS.md from run.sh's runs.tsv and same.tsv.

usage: report.py RUNS SAME DESCRIBE BASE ELAPSED_S SIZES
"""

import os
import platform
import subprocess
import sys
from collections import defaultdict

runs_path, same_path, describe, base, elapsed, sizes = sys.argv[1:7]

runs = defaultdict(list)
for line in open(runs_path):
    name, millions, kind, _round, user, sys_s, kb, wall, spill, written = line.rstrip("\n").split("\t")
    runs[(name, int(millions), kind)].append(
        dict(cpu=float(user) + float(sys_s), user=float(user), sys=float(sys_s), rss=int(kb) / 1024,
             wall=float(wall), spill=int(spill), written=int(written)))


def best(name, millions, kind):
    """The run with the least CPU (the least disturbed by other work), or None."""
    got = runs.get((name, millions, kind))
    return min(got, key=lambda r: r["cpu"]) if got else None


def rustc():
    try:
        return subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "rustc ?"


print("# Memory benchmark results\n")
print("`oai-bridge export` of the harvest benchmark's synthetic records (500 a page, about 2.1 KB of "
      "oai_dc each, https landing pages), served by `benches/harvest/server --on-demand`, which "
      "renders each page when it is asked for. *plain*: the sitemap alone; *profiles*: with the "
      "Signmap, OCX and five DiWoo categories. CDIF is left out: its files take 1.6-3 GB a "
      "million records, more than the machine's disk holds at 16 million.\n")
print(f"Machine: {os.cpu_count()} cores; Linux {platform.release()}; {rustc()}. oai-bridge at "
      f"{describe}; base: `{base}`. Sizes {sizes} (millions); the whole run took {int(elapsed) // 60} min "
      f"{int(elapsed) % 60} s.\n")
if int(os.environ.get("PROFILES_UP_TO", "50")) < max(int(m) for m in sizes.split()):
    print(f"The runs with profiles stopped at {os.environ['PROFILES_UP_TO']} million "
          "(`PROFILES_UP_TO`): past it their files outgrow the disk.\n")
print("Reproduce with `bash benches/memory/run.sh` (`SIZES=\"1 4 16 50\"` for 50 million).\n")

print("| records | export | peak RSS | CPU-s | CPU-s per million | wall s | spilled (peak bytes on disk) | bytes written |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for (name, millions, kind) in sorted(runs, key=lambda k: (k[1], k[2], k[0])):
    r = best(name, millions, kind)
    n = len(runs[(name, millions, kind)])
    label = {"base": f"{base} ({kind})", "ours": f"this branch ({kind})"}[name.split("-")[0]]
    if n > 1:
        label += f", best of {n}"
    print(f"| {millions:,}M | {label} | {r['rss']:.0f} MiB | {r['cpu']:.2f} | {r['cpu'] / millions:.2f} | "
          f"{r['wall']:.1f} | {r['spill']:,} | {r['written']:,} |")

print("\n| target | measured | verdict |")
print("| --- | --- | --- |")
peaks = [(m, k, best("ours", m, k)["rss"]) for (n, m, k) in runs if n == "ours"]
worst = max(peaks, key=lambda p: p[2]) if peaks else None
if worst:
    print(f"| peak RSS under 512 MiB at every size | at most {worst[2]:.0f} MiB ({worst[0]}M, {worst[1]}) | "
          f"**{'pass' if worst[2] < 512 else 'FAIL'}** |")
for kind in ("plain", "profiles"):
    ours, theirs = best("ours", 1, kind), best("base", 1, kind)
    if ours and theirs:
        ratio = ours["cpu"] / theirs["cpu"]
        print(f"| CPU per record at 1 million within 10% of {base}'s ({kind}) | {ours['cpu']:.2f} vs "
              f"{theirs['cpu']:.2f} CPU-s: {ratio:.2f}x | **{'pass' if ratio <= 1.10 else 'FAIL'}** |")
        print(f"| peak RSS at 1 million ({kind}) | {ours['rss']:.0f} vs {theirs['rss']:.0f} MiB: "
              f"{ours['rss'] / theirs['rss']:.2f}x | |")
for line in open(same_path):
    a, b, millions, verdict = line.rstrip("\n").split("\t")
    print(f"| output byte-identical at {millions}M: {a} vs {b} | {verdict} | "
          f"**{'pass' if verdict == 'identical' else 'FAIL'}** |")

print("\nCPU-seconds are user + system time of the export process (GNU time), the server's "
      "rendering not included; peak RSS is its maximum resident set. The spilled bytes are the "
      "most the harvest's temporary files held on disk at once (the export summary's "
      "`spill_bytes`): the inventory's sorted runs and merged file past its memory budget, and "
      "with profiles the record occurrences' file (about 20 bytes a record) and their versions' "
      "runs. With more than one round the least-CPU run is shown: other "
      "work shares the 2 cores.")
