#!/usr/bin/env python3
"""Turns the measurements of benches/incremental/run.sh into a Markdown report on stdout.

Usage: report.py WORK_DIR RECORDS CHANGED_EVERY
"""

import os
import platform
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harvest"))
from report import compare, read_lines, read_time  # noqa: E402

TARGET_SHARE = 0.05  # an incremental refresh costs at most 5% of a full harvest
TARGET_RESTART_S = 2.0
TARGET_RSS_MIB = 200.0
TARGET_PROFILES_SHARE = 0.10  # with every profile on, at most 10% (issue 30, point 5)


def main():
    work, records, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    w = lambda name: os.path.join(work, name)  # noqa: E731

    def one(name):
        t = read_time(w(name + ".time"))
        req = int(open(w(name + ".requests")).read().strip())
        cpu = t["user"] + t["sys"]
        return {"cpu": cpu, "user": t["user"], "sys": t["sys"], "wall": t["wall"],
                "rss": t["rss_kib"] / 1024, "exit": t["exit"], "requests": req}

    def measured(name):
        """The median run of NAME by CPU time (the lower of the middle two for an even count)
        among NAME-1, NAME-2, ..., with every run's CPU time in "runs", in run order."""
        runs = [one(n) for n in run_names(w, name)]
        m = dict(sorted(runs, key=lambda r: r["cpu"])[(len(runs) - 1) // 2])
        m["runs"] = [r["cpu"] for r in runs]
        m["exit"] = max((r["exit"] for r in runs), key=abs)  # a failed run shows
        return m

    plain, full, inc = measured("plain"), measured("full"), measured("incremental")
    expected = sorted(read_lines(w("expected.urls")) or [])
    # Every run's result is checked; the table shows the worst.
    checks = []
    for name in run_names(w, "incremental"):
        got = sorted(read_lines(w(name + ".urls")) or [])
        checks.append((compare(got, expected), len(got)))
    (same, only_got, missing), got_count = min(checks, key=lambda c: (c[0][0], -c[0][1] - c[0][2]))
    start, index_at, shard = open(w("restart")).read().split()
    restart = float(index_at) - float(start)
    hwm = int(open(w("gateway.hwm")).read().strip()) / 1024
    cpu_share, pairs = shares(w, one, "full", "incremental")
    req_share = inc["requests"] / full["requests"]
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = records // every

    def fmt(x, d=2):
        return f"{x:,.{d}f}"

    out = []
    out.append("# Incremental benchmark results\n")
    out.append(
        f"Synthetic repository of {records:,} records (`benches/harvest/server`), then the same with every "
        f"{every}th record changed: {changed:,} records ({100 / every:g}%), half of them updated (new "
        f"datestamp, revised title) and half deleted. Machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, Linux {platform.release()}. oai-bridge at {rev}.\n"
    )
    out.append("Reproduce with:\n\n```sh\nbash benches/incremental/run.sh\n```\n")
    out.extend(table([("plain export, no store (the reference)", plain),
                      ("full harvest through the store (`export --state`)", full),
                      ("incremental refresh after the change (`export --state`)", inc)], fmt))
    out.append("")
    out.append(f"The store costs {fmt(full['cpu'] / plain['cpu'])}x the CPU of a plain export on a full harvest "
               f"(SQLite inserts, then reading the records back to render).\n")
    out.append("| target | measured | verdict |")
    out.append("| --- | --- | --- |")
    verdict = lambda ok: "**pass**" if ok else "**FAIL**"  # noqa: E731
    out.append(f"| incremental CPU at most 5% of the full harvest's | {fmt(100 * cpu_share, 1)}% "
               f"{pairs} | {verdict(cpu_share <= TARGET_SHARE)} |")
    out.append(f"| incremental upstream requests at most 5% of the full harvest's | {fmt(100 * req_share, 1)}% "
               f"({inc['requests']:,} of {full['requests']:,}) | {verdict(req_share <= TARGET_SHARE)} |")
    out.append(f"| the incremental result equals the changed repository's URL set, in every run | "
               f"{got_count:,} URLs vs {len(expected):,} expected; {only_got} extra, {missing} missing | "
               f"{verdict(same)} |")
    out.append(f"| a restarted gateway serves the persisted generation within 2 s | index 200 after "
               f"{fmt(restart, 3)} s (upstream stopped); first shard {shard} | "
               f"{verdict(restart <= TARGET_RESTART_S and shard == '200')} |")
    out.append(f"| serving 1,000,000 records: peak RSS under 200 MiB besides the cache | gateway VmHWM "
               f"{fmt(hwm, 1)} MiB after its full refresh | {verdict(hwm < TARGET_RSS_MIB)} |")
    out.append("")
    out.append(
        "CPU-seconds are the exporting process's user + system time (GNU time), start to exit, "
        "including writing and publishing the files; each row is the median of the runs listed "
        "beside it (`RUNS`). Full harvest and refresh alternate (each refresh follows its own full "
        "harvest, from nothing), and a ratio is the median of the pairs' own: the two runs of a "
        "pair see the machine alike. Requests are counted by the server "
        "(Identify and every ListRecords page). The gateway's peak RSS is its VmHWM once the first "
        "refresh (a full harvest of the same repository through its store) is served; its cache "
        "is empty then."
    )
    if os.path.exists(w(run_names(w, "profiles-full")[0] + ".time")):
        out.append("")
        out.extend(profiles(w, measured, one, fmt, verdict, inc))
    print("\n".join(out))


def shares(w, one, full, refresh):
    """The refresh's CPU as a share of the full harvest's, the median of the pairs' own ratios
    (run.sh's `alternated`: each full harvest followed by its refresh), and how it was got."""
    pairs = [one(r)["cpu"] / one(f)["cpu"] for f, r in zip(run_names(w, full), run_names(w, refresh))]
    medians = f"{one_median(w, one, refresh):.2f} s of {one_median(w, one, full):.2f} s"
    if len(pairs) == 1:
        return pairs[0], f"({medians})"
    listed = ", ".join(f"{100 * p:.1f}%" for p in pairs)
    return statistics.median(pairs), f"(the median of {len(pairs)} pairs' ratios: {listed}; medians {medians})"


def one_median(w, one, name):
    """The median of NAME's runs' CPU time."""
    return statistics.median(one(n)["cpu"] for n in run_names(w, name))


def run_names(w, name):
    """NAME-1, NAME-2, ... as run.sh's `repeated` writes them, or NAME alone (one `timed` run)."""
    names = []
    while os.path.exists(w(f"{name}-{len(names) + 1}.time")):
        names.append(f"{name}-{len(names) + 1}")
    return names or [name]


def table(rows, fmt):
    """The measurements' table: LABEL and the median run, with every run's CPU time."""
    out = ["| | CPU-seconds (user + sys) | every run's CPU-seconds | upstream requests | wall (s) | "
           "peak RSS (MiB) | exit |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, m in rows:
        runs = ", ".join(fmt(c) for c in m["runs"])
        out.append(f"| {label} | {fmt(m['cpu'])} ({fmt(m['user'])} + {fmt(m['sys'])}) | {runs} | "
                   f"{m['requests']:,} | {fmt(m['wall'])} | {fmt(m['rss'], 1)} | {m['exit']} |")
    return out


def profiles(w, measured, one, fmt, verdict, plain_inc):
    """The second table: the same refresh with every profile a refresh patches on."""
    full, inc, whole = measured("profiles-full"), measured("profiles-incremental"), measured("profiles-whole")
    sums = lambda name: open(w(name)).read().splitlines()  # noqa: E731
    rendered = sums("profiles-whole.sums")
    # Every run's patched files against the render; the table shows the worst.
    patched, differ = max(((p, len(set(p) ^ set(rendered)))
                           for p in (sums(n + ".sums") for n in run_names(w, "profiles-incremental"))),
                          key=lambda c: c[1])
    share, pairs = shares(w, one, "profiles-full", "profiles-incremental")
    out = ["## With every profile a refresh patches\n",
           "The same repository with https identifiers and the Signmap, OCX, CDIF's metadata lists and "
           "five DiWoo categories on (`--signmap --ocx --cdif-list --diwoo com_N=N+1`), the same change.\n"]
    out.extend(table([("full harvest through the store, every profile", full),
                      ("incremental refresh, the profiles patched", inc),
                      ("the same refresh rendering every stored record (the ledger removed)", whole)], fmt))
    out.append("")
    out.append("| target | measured | verdict |")
    out.append("| --- | --- | --- |")
    out.append(f"| incremental CPU with every profile at most 10% of the full harvest's | "
               f"{fmt(100 * share, 1)}% {pairs}; rendering every record: "
               f"{fmt(100 * whole['cpu'] / full['cpu'], 1)}% | {verdict(share <= TARGET_PROFILES_SHARE)} |")
    out.append(f"| the patched files are byte for byte those of a render of every stored record, in every run | "
               f"{len(patched):,} files, sha256 of each; {differ} lines differ | "
               f"{verdict(differ == 0 and len(patched) > 0)} |")
    out.append("")
    if os.path.exists(w("floor-user.time")):
        out.extend(floor(w, fmt, full, inc, plain_inc))
    return out


def floor(w, fmt, full, inc, plain_inc):
    """What a patch that rewrites every file cannot do without (floor.py), against the target."""
    def cpu(name):
        t = read_time(w(name + ".time"))
        return t["user"] + t["sys"]

    user, kernel = cpu("floor-user"), cpu("floor-kernel")
    moved = int(open(w("floor-user.bytes")).read())
    files = int(open(w("floor.files")).read())
    share = lambda s: f"{fmt(100 * s / full['cpu'], 1)}%"  # noqa: E731
    out = ["### The floor under the patch\n",
           f"With one record in a hundred changed, every shard of every profile changes, so the patch "
           f"reads all {files:,} published files of the profiles ({fmt(moved / 1e9)} GB) and writes as "
           f"many bytes again. `floor.py` does only that, with nothing parsed, merged or hashed "
           f"(its Python start, a few hundredths of a second, counted), right after the full harvest. "
           f"The files are not in the page cache, as the export left them (written with direct "
           f"I/O), for the floors and the patch alike:\n",
           "| | CPU-seconds | share of the full harvest with every profile |",
           "| --- | ---: | ---: |",
           f"| the profiles' files read and their bytes written again, both with direct I/O, as the "
           f"bridge reads and writes them (`floor.py user`) | {fmt(user)} | {share(user)} |",
           f"| the same bytes copied inside the kernel (`copy_file_range`, `floor.py kernel`) | "
           f"{fmt(kernel)} | {share(kernel)} |",
           f"| the incremental refresh without profiles (the first table) | {fmt(plain_inc['cpu'])} | "
           f"{share(plain_inc['cpu'])} |",
           f"| the patched refresh (above) | {fmt(inc['cpu'])} | {share(inc['cpu'])} |",
           "",
           f"A patch through user space costs at least the refresh without profiles plus the first "
           f"row: {share(plain_inc['cpu'] + user)} of the full harvest; one that copied the unchanged "
           f"runs in the kernel, at least {share(plain_inc['cpu'] + kernel)}. The patch measured is "
           f"{fmt(inc['cpu'] / (plain_inc['cpu'] + user))}x the first of these.",
           ""]
    return out


if __name__ == "__main__":
    main()
