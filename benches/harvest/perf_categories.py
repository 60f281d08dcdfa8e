#!/usr/bin/env python3
"""Groups the samples of a `perf record -g` profile of `oai-bridge export` by pipeline stage and
lists the hottest leaf functions, so a profile reads as "where do the CPU-seconds go".

Usage: perf script -i perf.data | perf_categories.py [TOTAL_CPU_SECONDS RECORDS]

Each sample is charged to the first stage found walking its stack from the leaf up, so helpers
(memcpy, malloc, from_utf8) count for the stage that called them.
"""

import collections
import re
import sys

# (stage, pattern matched against a frame's symbol), leaf-most match wins.
STAGES = [
    ("prepare: body checks before parsing (illegal chars, UTF-8)", r"parse::prepare|remove_illegal_chars|simdutf8"),
    ("quick-xml: namespace resolution", r"quick_xml::name::|resolve_event|resolve_prefix|NamespaceResolver"),
    ("quick-xml: tokenising, attributes, unescaping", r"quick_xml::"),
    ("classify: URL parsing (url, idna)", r"^url::|idna::|Url::parse"),
    ("classify / scope / persistent ids", r"classify::|scope::"),
    ("inventory: add (arena, hashing)", r"Inventory::add|inventory::Inventory>::add"),
    ("inventory: finish (sort, dedup)", r"Inventory::finish|inventory::.*finish"),
    ("sitemap rendering and escaping", r"render::|render_shards|sitemap::|escape"),
    ("writing files", r"publish::|Staging"),
    ("parse_list_records: own code (captures, Strings, Records)", r"parse_list_records|oai::parse::"),
    ("harvest loop, page hand-off, drop of pages", r"oai::harvest::|pipeline::harvest|drop_in_place<.*Record"),
    ("HTTP client: reqwest / hyper / body chunks", r"reqwest::|hyper::|hyper_util::|h2::|http_body|Client::attempt|bytes::"),
    ("tokio runtime / scheduling", r"tokio::"),
]
COMPILED = [(name, re.compile(p)) for name, p in STAGES]
# Kernel samples are charged by what the kernel was doing, first match walking up.
KERNEL = [
    ("kernel: socket receive (copying responses in)", r"tcp_recvmsg|sock_recvmsg|skb_copy_datagram"),
    ("kernel: file writes (sitemaps)", r"vfs_write.*|ext4_|generic_perform_write"),
    ("kernel: page faults (heap growth)", r"exc_page_fault|do_anonymous_page|handle_mm_fault"),
    ("kernel: munmap / madvise (heap shrink)", r"munmap|madvise|zap_"),
    ("kernel: waits and wake-ups (futex, epoll, scheduling)", r"futex|epoll|schedule|eventfd|try_to_wake_up"),
    ("kernel: network stack (loopback TCP)", r"tcp_|ip_|net_rx|napi|__netif"),
]
KERNEL_COMPILED = [(name, re.compile(p)) for name, p in KERNEL]


def samples(stream):
    frames = []
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if frames:
                yield frames
            frames = []
            continue
        if not line.startswith((" ", "\t")):
            frames = []  # header line of a sample
            continue
        # "\t    55d0c0 symbol+0x12 (/path/dso)"
        parts = line.strip().split(" ", 1)
        if len(parts) < 2:
            continue
        sym, _, dso = parts[1].rpartition(" (")
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        frames.append((sym, dso.rstrip(")")))
    if frames:
        yield frames


def main():
    total_cpu = float(sys.argv[1]) if len(sys.argv) > 1 else None
    records = int(sys.argv[2]) if len(sys.argv) > 2 else None
    stages = collections.Counter()
    leaves = collections.Counter()
    n = 0
    for frames in samples(sys.stdin):
        n += 1
        leaf, leaf_dso = frames[0]
        kernel = "kernel" in leaf_dso or leaf_dso.startswith("[")
        leaves[("[k] " if kernel else "") + leaf] += 1
        stage = None
        if kernel:
            for sym, dso in frames:
                if "kernel" not in dso:
                    break
                stage = next((name for name, rx in KERNEL_COMPILED if rx.search(sym)), None)
                if stage:
                    break
            stage = stage or "kernel (other)"
        for sym, _ in [] if stage else frames:
            for name, rx in COMPILED:
                if rx.search(sym):
                    stage = name
                    break
            if stage:
                break
        if stage is None:
            stage = "other"
        stages[stage] += 1
    if not n:
        sys.exit("no samples")
    per_m = (lambda share: f" {share * total_cpu * 1e6 / records:6.2f} s/M") if total_cpu and records else (lambda share: "")
    print(f"{n} samples")
    print("\nby stage (inclusive of the helpers each stage calls):")
    for name, c in stages.most_common():
        print(f"  {100 * c / n:5.1f}%{per_m(c / n)}  {name}")
    print("\nhottest leaf functions (self time):")
    for name, c in leaves.most_common(25):
        print(f"  {100 * c / n:5.1f}%  {name[:140]}")


if __name__ == "__main__":
    main()
