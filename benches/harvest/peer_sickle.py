#!/usr/bin/env python3
"""The peer harvester of the benchmark: Sickle (with lxml) harvests the same server, ListRecords
in oai_dc following resumption tokens, and keeps the dc:identifier values the way oai-bridge
publishes them, so the two URL sets can be compared:

- deleted records publish nothing;
- a value is trimmed of XML whitespace, DOIs and Handles in any spelling are dropped (cited,
  never listed), and only http(s) URLs without whitespace are kept;
- a URL is kept when its scheme, host and port equal the baseURL's and its path starts with the
  baseURL's directory (Google's rule, oai-bridge's default scope);
- the set is deduplicated and written sorted, one URL a line.

The server emits canonical ASCII URLs (lower-case host, no default port, no dot segments), so no
further normalisation is needed for the sets to be comparable.

Usage: peer_sickle.py BASE_URL OUT_FILE
"""

import sys
import time
from urllib.parse import urlsplit

from sickle import Sickle

DOI_HDL_PREFIXES = (
    "doi:",
    "info:doi/",
    "https://doi.org/",
    "http://doi.org/",
    "https://dx.doi.org/",
    "http://dx.doi.org/",
    "hdl:",
    "info:hdl/",
    "https://hdl.handle.net/",
    "http://hdl.handle.net/",
)
DEFAULT_PORTS = {"http": 80, "https": 443}


def scope_of(base_url):
    p = urlsplit(base_url)
    directory = p.path[: p.path.rfind("/") + 1] or "/"
    return (p.scheme.lower(), p.hostname, p.port or DEFAULT_PORTS[p.scheme.lower()], directory)


def publishable(value, scope):
    v = value.strip(" \t\r\n")
    low = v[:24].lower()
    if low.startswith(DOI_HDL_PREFIXES) or v.startswith("10."):
        return None
    if not (low.startswith("http://") or low.startswith("https://")):
        return None
    if any(c.isspace() for c in v):
        return None
    try:
        p = urlsplit(v)
        port = p.port or DEFAULT_PORTS[p.scheme.lower()]
    except ValueError:
        return None
    if (p.scheme.lower(), p.hostname, port) != scope[:3] or not p.path.startswith(scope[3]):
        return None
    return v


def main():
    base_url, out = sys.argv[1], sys.argv[2]
    scope = scope_of(base_url)
    started = time.monotonic()
    sickle = Sickle(base_url)
    records = deleted = 0
    urls = set()
    for record in sickle.ListRecords(metadataPrefix="oai_dc", ignore_deleted=False):
        records += 1
        if record.deleted:
            deleted += 1
            continue
        for value in record.metadata.get("identifier", ()):
            if value is None:
                continue
            url = publishable(value, scope)
            if url is not None:
                urls.add(url)
    with open(out, "w", encoding="utf-8") as f:
        for url in sorted(urls):
            f.write(url)
            f.write("\n")
    print(
        f"sickle: {records} records ({deleted} deleted), {len(urls)} URLs in scope "
        f"in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
