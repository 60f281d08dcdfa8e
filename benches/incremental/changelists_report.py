#!/usr/bin/env python3
"""Turns the measurements of benches/incremental/changelists.sh into a Markdown section on stdout.

Usage: changelists_report.py WORK_DIR CLK_TCK RECORDS CHANGED_EVERY

The `on` repository's Change Lists are checked against what its sitemap says changed: the
sitemap served before the refresh and the one after, compared here URL by URL (created: only
after; deleted: only before; updated: in both, another lastmod).
"""

import glob
import os
import re
import statistics
import subprocess
import sys

TARGET_EXTRA = 0.05  # Change Lists add at most 5% to an incremental refresh (issue 32, point 6)
ENTRY = re.compile(rb"<url><loc>([^<]*)</loc>(?:<lastmod>([^<]*)</lastmod>)?")
CHANGE = re.compile(rb'<url><loc>([^<]*)</loc>(?:<lastmod>[^<]*</lastmod>)?<rs:md change="([a-z]+)"')


def pages(folder):
    """URL -> lastmod of every shard of the sitemap saved in `folder`."""
    out = {}
    for path in glob.glob(os.path.join(folder, "sitemap-*.xml")):
        for loc, lastmod in ENTRY.findall(open(path, "rb").read()):
            out[loc] = lastmod
    return out


def expected(before, after):
    """URL -> kind of change between two sitemaps."""
    out = {u: "created" for u in after.keys() - before.keys()}
    out.update({u: "deleted" for u in before.keys() - after.keys()})
    out.update({u: "updated" for u in before.keys() & after.keys() if before[u] != after[u]})
    return out


def listed(folder):
    """(URL, kind) of every entry of the Change Lists saved in `folder`, in their order."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "changelist-*.xml"))):
        out.extend(CHANGE.findall(open(path, "rb").read()))
    return [(loc, kind.decode()) for loc, kind in out]


def fmt(x, digits=2):
    return f"{x:,.{digits}f}"


def kinds(changes):
    counts = {k: 0 for k in ("created", "updated", "deleted")}
    for kind in changes:
        counts[kind] += 1
    return ", ".join(f"{n:,} {k}" for k, n in counts.items())


def section(work, hz, label, title, target):
    w = lambda name: os.path.join(work, name)  # noqa: E731
    cpu = {}
    for repo in ("on", "off"):
        path = w(f"{label}-{repo}.cpu")
        cpu[repo] = [int(line) / hz for line in open(path) if line.strip()]
    requests = {r: sorted({int(x) for x in open(w(f"{label}-{r}.requests")) if x.strip()}) for r in cpu}
    least = {r: min(v) for r, v in cpu.items()}
    median = {r: statistics.median(v) for r, v in cpu.items()}
    out = [f"### {title}", ""]
    out.append("| repository | rounds | upstream requests | least CPU-s | median CPU-s | every round (CPU-s) |")
    out.append("| --- | ---: | ---: | ---: | ---: | --- |")
    for repo, name in (("off", "`off` (`changelist_days = 0`)"), ("on", "`on` (Change Lists, the default)")):
        every = ", ".join(fmt(x) for x in cpu[repo])
        reqs = " or ".join(f"{n:,}" for n in requests[repo])
        out.append(f"| {name} | {len(cpu[repo])} | {reqs} | {fmt(least[repo])} | {fmt(median[repo])} | {every} |")
    out.append("")
    extra_least = least["on"] / least["off"] - 1
    extra_median = median["on"] / median["off"] - 1
    before, after = pages(w(f"{label}-before")), pages(w(f"{label}-after"))
    want = expected(before, after)
    got = listed(w(f"{label}-changelists"))
    got_map = dict(got)
    missing = sum(1 for u, k in want.items() if got_map.get(u) != k)
    extra = sum(1 for u in got_map if u not in want)
    twice = len(got) - len(got_map)
    lists = len(glob.glob(os.path.join(w(f"{label}-changelists"), "changelist-*.xml")))
    out.append("| target | measured | verdict |")
    out.append("| --- | --- | --- |")
    claim = "Change Lists add at most 5% to the refresh's CPU" if target else "what Change Lists add (no target)"
    out.append(
        f"| {claim} | least: {fmt(100 * extra_least, 1)}% "
        f"({fmt(least['on'])} s against {fmt(least['off'])} s, ratio {fmt(least['on'] / least['off'], 3)}); "
        f"median: {fmt(100 * extra_median, 1)}% (ratio {fmt(median['on'] / median['off'], 3)}) | "
        f"{verdict(extra_least <= TARGET_EXTRA) if target else '-'} |"
    )
    out.append(
        f"| the Change Lists hold one entry per changed landing page, of its kind | {len(got):,} entries "
        f"in {lists} list(s) ({kinds(k for _, k in got)}); the sitemaps before and after differ in "
        f"{len(want):,} pages ({kinds(want.values())}); {missing} missing or of another kind, {extra} "
        f"extra, {twice} listed twice | {verdict(missing == 0 and extra == 0 and twice == 0 and got)} |"
    )
    out.append("")
    perf = w(f"{label}.perf.txt")
    if os.path.exists(perf) and os.path.getsize(perf):
        out.append("One more refresh of `on` under perf (`PERF=1`, not counted above): the share of its "
                   "samples in these functions and what they call:")
        out.append("")
        out.append("```")
        out.extend(" ".join(line.split()) for line in open(perf) if line.strip())
        out.append("```")
        out.append("")
    return out


def verdict(ok):
    return "**pass**" if ok else "**FAIL**"


def main():
    work, hz, records, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    # REV: the commit of the binary measured (BIN's), when not the working tree's.
    rev = os.environ.get("REV") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load = lambda name: open(os.path.join(work, name)).read().split("load average:")[1].strip()  # noqa: E731
    out = ["## What the Change Lists cost an incremental refresh", ""]
    out.append(
        f"Issue 32, point 6: one gateway (`serve`) with two repositories harvesting the same upstream "
        f"of {records:,} records: `on` with the default `changelist_days` (ResourceSync's Change Lists "
        f"written at every refresh) and `off` with `changelist_days = 0`. After both first (full) "
        f"refreshes the state folder is kept; the upstream then changes every {every}th record "
        f"({records // every:,}, half of them deleted). Each round restores the kept state, starts the "
        f"gateway, triggers one repository's refresh (`POST /-/refresh/{{name}}`) and counts the "
        f"gateway's CPU-seconds (utime + stime, `/proc/PID/stat`) from the trigger until the refresh "
        f"ended (its start-up not counted); the repositories alternate, and which goes first too. "
        f"oai-bridge at {rev}. Load average at the start {load('load.start')}, at the end "
        f"{load('load.end')} (2 cores, shared with CI)."
    )
    out.append("")
    out.append("```sh\nbash benches/incremental/changelists.sh   # FALLBACK=1: the full-harvest refresh too\n```")
    out.append("")
    out.extend(section(work, hz, "incremental", "An incremental refresh (`from`)", True))
    if os.path.exists(os.path.join(work, "fallback-on.cpu")):
        out.extend(
            section(
                work,
                hz,
                "fallback",
                "A refresh that harvests in full (deletedRecord transient, the full-harvest interval passed)",
                False,
            )
        )
    print("\n".join(out).rstrip("\n"))


if __name__ == "__main__":
    main()
