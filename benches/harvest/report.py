#!/usr/bin/env python3
"""Turns the measurements of benches/harvest/run.sh into a Markdown report (stdout and a file).

Reads GNU time -v outputs, the URL-set files and the server logs from the run's work folder;
compares the URL sets; checks the issue's targets. Exit status 0, or 3 with --strict when a
target is missed; 1 when a harvest failed or the URL sets differ (a correctness failure).
"""

import argparse
import os
import platform
import re
import subprocess
import sys

TARGET_CPU_PER_MILLION = 3.0
TARGET_RATIO = 20.0
TARGET_RSS_MIB = 256.0


def read_time(path):
    """GNU time -v output -> dict with user, sys, rss_kib, wall, exit."""
    if not os.path.exists(path):
        return None
    text = open(path, encoding="utf-8", errors="replace").read()

    def field(name):
        m = re.search(r"^\s*" + re.escape(name) + r": (.*)$", text, re.M)
        return m.group(1).strip() if m else None

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    secs = 0.0
    if wall:
        for part in wall.split(":"):
            secs = secs * 60 + float(part)
    signal = re.search(r"Command terminated by signal (\d+)", text)
    return {
        "user": float(field("User time (seconds)") or 0),
        "sys": float(field("System time (seconds)") or 0),
        "rss_kib": int(field("Maximum resident set size (kbytes)") or 0),
        "wall": secs,
        "exit": 128 + int(signal.group(1)) if signal else int(field("Exit status") or -1),
    }


def read_lines(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def compare(a, b):
    """(identical, only_in_a, only_in_b) of two sorted URL lists."""
    if a is None or b is None:
        return False, None, None
    sa, sb = set(a), set(b)
    return a == b, len(sa - sb), len(sb - sa)


def server_stats(log_path):
    text = open(log_path, encoding="utf-8").read() if os.path.exists(log_path) else ""
    m = re.search(
        r"(\d+) records in (\d+) pages of (\d+); ([\d.]+) MB in all, (\d+) bytes a record on average, "
        r"largest page ([\d.]+) MB",
        text,
    )
    if not m:
        return {}
    return {
        "records": int(m.group(1)),
        "pages": int(m.group(2)),
        "page_size": int(m.group(3)),
        "total_mb": float(m.group(4)),
        "record_bytes": int(m.group(5)),
        "largest_mb": float(m.group(6)),
    }


def read_float(path):
    try:
        return float(open(path).read().strip())
    except (OSError, ValueError):
        return None


def cmd_output(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def cpu_model():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def fmt(x, digits=2):
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:,.{digits}f}"


def verdict(ok):
    return "**pass**" if ok else "**FAIL**"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--big-records", type=int, required=True)
    ap.add_argument("--command", required=True, help="the command that reproduces the run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--peer-version", default="")
    ap.add_argument("--ours-version", default="")
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    w = lambda name: os.path.join(a.work, name)  # noqa: E731

    ours = read_time(w("ours.time"))
    peer = read_time(w("peer.time"))
    big = read_time(w("big.time"))
    srv = server_stats(w("server.log"))
    big_srv = server_stats(w("big-server.log"))
    ours_urls, peer_urls, expected = read_lines(w("ours.urls")), read_lines(w("peer.urls")), read_lines(w("expected.urls"))
    big_urls, big_expected = read_lines(w("big-ours.urls")), read_lines(w("big-expected.urls"))

    n = a.records
    million = n / 1e6

    def derived(t):
        if t is None:
            return {}
        cpu = t["user"] + t["sys"]
        return {
            "wall": t["wall"],
            "cpu": cpu,
            "user": t["user"],
            "sys": t["sys"],
            "rps": n / t["wall"] if t["wall"] else None,
            "cpu_per_m": cpu / million if million else None,
            "per_cpu_s": n / cpu if cpu else None,
            "rss_mib": t["rss_kib"] / 1024,
            "exit": t["exit"],
        }

    o, p = derived(ours), derived(peer)

    def ratio(x, y):
        return x / y if (x is not None and y) else None

    same_op, only_o, only_p = compare(ours_urls, peer_urls)
    same_oe, only_o_e, only_e = compare(ours_urls, expected)
    big_same, big_only_o, big_only_e = compare(big_urls, big_expected)

    srv_cpu_ours, srv_cpu_peer = read_float(w("server-cpu-ours")), read_float(w("server-cpu-peer"))

    rows = [
        ("records harvested", fmt(n), fmt(n), ""),
        ("exit status", str(o.get("exit", "n/a")), str(p.get("exit", "n/a")), ""),
        ("wall time (s)", fmt(o.get("wall")), fmt(p.get("wall")), ""),
        ("records/s (wall)", fmt(o.get("rps"), 0), fmt(p.get("rps"), 0),
         f"{fmt(ratio(o.get('rps'), p.get('rps')), 1)}x"),
        ("CPU-seconds, user + sys", f"{fmt(o.get('cpu'))} ({fmt(o.get('user'))} + {fmt(o.get('sys'))})",
         f"{fmt(p.get('cpu'))} ({fmt(p.get('user'))} + {fmt(p.get('sys'))})", ""),
        ("CPU-seconds per million records", fmt(o.get("cpu_per_m")), fmt(p.get("cpu_per_m")),
         f"{fmt(ratio(o.get('cpu_per_m'), p.get('cpu_per_m')), 3)}x"),
        ("records per CPU-second", fmt(o.get("per_cpu_s"), 0), fmt(p.get("per_cpu_s"), 0),
         f"**{fmt(ratio(o.get('per_cpu_s'), p.get('per_cpu_s')), 1)}x**"),
        ("peak RSS (MiB)", fmt(o.get("rss_mib"), 1), fmt(p.get("rss_mib"), 1),
         f"{fmt(ratio(o.get('rss_mib'), p.get('rss_mib')), 2)}x"),
        ("distinct URLs published", fmt(len(ours_urls)) if ours_urls is not None else "n/a",
         fmt(len(peer_urls)) if peer_urls is not None else "n/a", ""),
        ("server CPU-seconds during the harvest", fmt(srv_cpu_ours), fmt(srv_cpu_peer), ""),
        ("machine load average (1 min) at start", fmt(read_float(w("load-ours"))), fmt(read_float(w("load-peer"))), ""),
    ]

    per_cpu_ratio = ratio(o.get("per_cpu_s"), p.get("per_cpu_s"))
    checks = [
        ("at least 20x the peer's records per CPU-second",
         f"{fmt(per_cpu_ratio, 1)}x", per_cpu_ratio is not None and per_cpu_ratio >= TARGET_RATIO),
        ("at most 3 CPU-seconds per million records",
         f"{fmt(o.get('cpu_per_m'))} s", o.get("cpu_per_m") is not None and o["cpu_per_m"] <= TARGET_CPU_PER_MILLION),
        ("identical URL set (oai-bridge vs Sickle)",
         f"{fmt(len(ours_urls)) if ours_urls else 'n/a'} vs {fmt(len(peer_urls)) if peer_urls else 'n/a'}; "
         f"{only_o} only in ours, {only_p} only in the peer's", same_op),
        ("identical URL set (oai-bridge vs the generator's own list)",
         f"{fmt(len(expected)) if expected else 'n/a'} expected; {only_o_e} only in ours, {only_e} missing", same_oe),
        ("peak RSS at most 256 MiB for the million records",
         f"{fmt(o.get('rss_mib'), 1)} MiB", o.get("rss_mib") is not None and o["rss_mib"] <= TARGET_RSS_MIB),
    ]
    bd = derived(big) if big else {}
    big_ok = bool(big) and big["exit"] == 0 and big_same
    checks.append((
        "pages over 10 MB: no failure or truncation",
        (f"{big_srv.get('pages', '?')} pages of {big_srv.get('page_size', '?')} records, largest "
         f"{big_srv.get('largest_mb', '?')} MB; exit {bd.get('exit', 'n/a')}; "
         f"{fmt(len(big_urls)) if big_urls is not None else 'n/a'} of "
         f"{fmt(len(big_expected)) if big_expected is not None else 'n/a'} URLs, "
         f"{big_only_o} extra, {big_only_e} missing; peak RSS {fmt(bd.get('rss_mib'), 1)} MiB, "
         f"{fmt(bd.get('cpu'))} CPU-s"),
        big_ok and big_srv.get("largest_mb", 0) > 10,
    ))

    rustc = cmd_output("rustc", "--version")
    lines = []
    lines.append("# Harvest benchmark results\n")
    lines.append(
        f"Synthetic repository: {fmt(srv.get('records', n))} records, {srv.get('page_size', '?')} a page "
        f"({srv.get('pages', '?')} pages, {srv.get('total_mb', '?')} MB of responses, "
        f"{srv.get('record_bytes', '?')} bytes of oai_dc a record on average, largest page "
        f"{srv.get('largest_mb', '?')} MB), served pre-rendered over HTTP/1.1 on 127.0.0.1 by "
        "`benches/harvest/server`.\n"
    )
    lines.append(
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; {platform.system()} {platform.release()}; "
        f"{rustc}; Python {platform.python_version()}; peer {a.peer_version}. "
        f"oai-bridge at {a.ours_version}.\n"
    )
    lines.append("Reproduce with:\n")
    lines.append(f"```sh\n{a.command}\n```\n")
    lines.append("| | oai-bridge (release) | peer: Sickle + lxml | ours vs peer |")
    lines.append("| --- | --- | --- | --- |")
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    lines.append("")
    lines.append("| target | measured | verdict |")
    lines.append("| --- | --- | --- |")
    for name, measured, ok in checks:
        lines.append(f"| {name} | {measured} | {verdict(ok)} |")
    lines.append("")
    lines.append(
        "CPU-seconds are user + system time of the harvesting process alone (GNU time), from start "
        "to exit: oai-bridge's include writing the sitemaps; the server's own CPU is shown apart. "
        "records/s divide the records by wall time. Peak RSS is the process's maximum resident set. "
        "A load average above 1 at the start means other work shared the 2 cores: CPU-seconds then "
        "run high (shared caches), wall times more so."
    )
    report = "\n".join(lines) + "\n"
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(report)
    print(report)

    correctness = same_op and same_oe and big_ok and o.get("exit") == 0 and p.get("exit") == 0
    if not correctness:
        return 1
    if a.strict and not all(ok for _, _, ok in checks):
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
