#!/usr/bin/env python3
"""Extracts the URL set of an oai-bridge export: every <loc> of its sitemap-N.xml(.gz) shards,
XML-unescaped, checked to be distinct, written sorted one a line.

Usage: sitemap_urls.py EXPORT_DIR OUT_FILE
"""

import gzip
import os
import re
import sys
from xml.sax.saxutils import unescape

LOC = re.compile(rb"<loc>([^<]*)</loc>")
ENTITIES = {"&quot;": '"', "&apos;": "'"}


def shard_number(name):
    return int(re.match(r"sitemap-(\d+)\.xml", name).group(1))


def main():
    folder, out = sys.argv[1], sys.argv[2]
    names = sorted(
        (n for n in os.listdir(folder) if re.fullmatch(r"sitemap-\d+\.xml(\.gz)?", n)),
        key=shard_number,
    )
    if not names:
        sys.exit(f"no sitemap-N.xml shards in {folder}")
    urls = []
    for name in names:
        path = os.path.join(folder, name)
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read()
        urls.extend(unescape(m.decode("utf-8"), ENTITIES) for m in LOC.findall(data))
    distinct = sorted(set(urls))
    if len(distinct) != len(urls):
        sys.exit(f"{len(urls) - len(distinct)} URLs listed more than once across {len(names)} shards")
    with open(out, "w", encoding="utf-8") as f:
        for url in distinct:
            f.write(url)
            f.write("\n")
    print(f"sitemaps: {len(urls)} URLs in {len(names)} shards", file=sys.stderr)


if __name__ == "__main__":
    main()
