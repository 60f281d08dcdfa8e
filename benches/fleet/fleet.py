"""The fleet benchmark's helpers (benches/fleet/run.sh): writes the repositories, and checks and
measures a running gateway over one kept-alive connection (a process per request would cost
more than the gateway's answer at ten thousand repositories).

    python3 fleet.py generate WORK REPOS MEDIAN SIGMA MAX LARGE_EVERY LARGE_RECORDS
                             (writes WORK/sizes-REPOS: the record counts, one a line)
    python3 fleet.py check PORT WORK REPOS   (prints the URLs published; exits 1 when short)
    python3 fleet.py time PORT PATH ROUNDS   (prints: median seconds, bytes, sample lines)
"""
import http.client
import math
import os
import random
import statistics
import sys
import time

HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<Repository xmlns="http://www.openarchives.org/OAI/2.0/static-repository"
            xmlns:oai="http://www.openarchives.org/OAI/2.0/">
  <Identify>
    <oai:repositoryName>Journal {j}</oai:repositoryName>
    <oai:baseURL>https://journals.example/{j}/oai</oai:baseURL>
    <oai:protocolVersion>2.0</oai:protocolVersion>
    <oai:adminEmail>editor@journals.example</oai:adminEmail>
    <oai:earliestDatestamp>2020-01-01</oai:earliestDatestamp>
    <oai:deletedRecord>persistent</oai:deletedRecord>
    <oai:granularity>YYYY-MM-DD</oai:granularity>
  </Identify>
  <ListMetadataFormats>
    <oai:metadataFormat>
      <oai:metadataPrefix>oai_dc</oai:metadataPrefix>
      <oai:schema>http://www.openarchives.org/OAI/2.0/oai_dc.xsd</oai:schema>
      <oai:metadataNamespace>http://www.openarchives.org/OAI/2.0/oai_dc/</oai:metadataNamespace>
    </oai:metadataFormat>
  </ListMetadataFormats>
  <ListRecords metadataPrefix="oai_dc">
"""
RECORD = """  <oai:record>
    <oai:header>
      <oai:identifier>oai:journals.example:{j}/{n}</oai:identifier>
      <oai:datestamp>2024-01-{d:02}</oai:datestamp>
    </oai:header>
    <oai:metadata>
      <oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">
        <dc:title>Article {n} of journal {j}</dc:title>
        <dc:creator>Author, An</dc:creator>
        <dc:type>Article</dc:type>
        <dc:identifier>https://journals.example/{j}/article/view/{n}</dc:identifier>
      </oai_dc:dc>
    </oai:metadata>
  </oai:record>
"""


def name(i):
    return f"j{i:05d}"


def sizes(repos, median, sigma, most, large_every, large_records):
    """Records of each repository: lognormal around `median` (most small, a long tail), from 10
    to `most`, and one of `large_records` every `large_every` (at index 500 of each block).
    Seeded, so that the first thousand of ten thousand are the thousand of a smaller run."""
    rng = random.Random(30)
    out = []
    for i in range(repos):
        n = min(most, max(10, round(rng.lognormvariate(math.log(median), sigma))))
        if large_every and i % large_every == 500:
            n = large_records
        out.append(n)
    return out


def generate(work, repos, median, sigma, most, large_every, large_records):
    os.makedirs(f"{work}/data", exist_ok=True)
    counts = sizes(repos, median, sigma, most, large_every, large_records)
    with open(f"{work}/sizes-{repos}", "w") as f:
        f.write("".join(f"{n}\n" for n in counts))
    for i, records in enumerate(counts):
        j = name(i)
        path = f"{work}/data/{j}.xml"
        marker = f"{path}.{records}"
        if os.path.exists(marker):
            continue  # Written by a run of more repositories, with the same count.
        with open(path, "w") as f:
            f.write(HEAD.format(j=j))
            for n in range(1, records + 1):
                f.write(RECORD.format(j=j, n=n, d=n % 28 + 1))
            f.write("  </ListRecords>\n</Repository>\n")
        open(marker, "w").close()


def get(conn, path):
    conn.request("GET", path)
    answer = conn.getresponse()
    body = answer.read()
    if answer.status != 200:
        raise SystemExit(f"GET {path}: {answer.status}")
    return body


def check(port, work, repos):
    counts = [int(line) for line in open(f"{work}/sizes-{repos}")]
    conn = http.client.HTTPConnection("127.0.0.1", port)
    urls = 0
    short = 0
    for i, expected in enumerate(counts):
        j = name(i)
        index = get(conn, f"/{j}/sitemap.xml").decode()
        found = 0
        for part in index.split("<loc>")[1:]:
            shard = part.split("<", 1)[0].split(f":{port}", 1)[1]
            found += get(conn, shard).count(b"<loc>https://journals.example/")
        urls += found
        short += found != expected
    print(urls)
    sys.exit(1 if short else 0)


def timed(port, path, rounds):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        body = get(conn, path)
        took.append(time.perf_counter() - start)
    samples = sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))
    print(f"{statistics.median(took):.4f} {len(body)} {samples}")


if __name__ == "__main__":
    verb, args = sys.argv[1], sys.argv[2:]
    if verb == "generate":
        generate(args[0], int(args[1]), float(args[2]), float(args[3]), int(args[4]),
                 int(args[5]), int(args[6]))
    elif verb == "check":
        check(int(args[0]), args[1], int(args[2]))
    elif verb == "time":
        timed(int(args[0]), args[1], int(args[2]))
