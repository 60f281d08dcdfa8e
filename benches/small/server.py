#!/usr/bin/env python3
"""The third-party upstream of the small-records benchmark: a repository of RECORDS small oai_dc
records (a few hundred bytes each: a title, a creator, a date, a type and two identifiers, one a
landing page under the baseURL's directory) answered by `oai_repo` (MSU Libraries' OAI-PMH
repository library, from PyPI) through its own DataInterface, ListRecords, resumption tokens and
lxml serialisation.

So that the server's Python does not pace the harvesters being measured, every answer of the
harvest (Identify and each ListRecords page, as oai_repo makes them, resumption tokens included)
is made once at start and kept; requests are then answered from memory over HTTP/1.1 with
keep-alive. A request the walk did not see is answered by oai_repo as it comes.

Usage: server.py PORT RECORDS PAGE_SIZE   (prints "ready" on stdout once it listens)
"""

import sys
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from lxml import etree
import oai_repo

DC = "http://purl.org/dc/elements/1.1/"
OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


class Small(oai_repo.DataInterface):
    """RECORDS records `oai:small.example:N`, each with a landing page `{base dir}records/N`."""

    def __init__(self, base_url, records, page_size):
        self.base_url = base_url
        self.records = records
        self.limit = page_size
        self.pages = base_url[: base_url.rfind("/") + 1] + "records/"

    def get_identify(self):
        identify = oai_repo.Identify()
        identify.repository_name = "Small records"
        identify.base_url = self.base_url
        identify.admin_email = ["admin@small.example"]
        identify.earliest_datestamp = "2024-01-01"
        identify.deleted_record = "no"
        identify.granularity = "YYYY-MM-DD"
        return identify

    def is_valid_identifier(self, identifier):
        return self.number(identifier) is not None

    def number(self, identifier):
        prefix = "oai:small.example:"
        if identifier.startswith(prefix) and identifier[len(prefix):].isdigit():
            n = int(identifier[len(prefix):])
            return n if 1 <= n <= self.records else None
        return None

    def get_metadata_formats(self, identifier=None):
        return [
            oai_repo.MetadataFormat(
                "oai_dc", "http://www.openarchives.org/OAI/2.0/oai_dc.xsd", OAI_DC
            )
        ]

    def get_record_header(self, identifier):
        header = oai_repo.RecordHeader()
        header.identifier = identifier
        header.datestamp = "2024-01-01"
        return header

    def get_record_metadata(self, identifier, metadataprefix):
        n = self.number(identifier)
        dc = etree.Element(f"{{{OAI_DC}}}dc", nsmap={"oai_dc": OAI_DC, "dc": DC})
        for name, value in (
            ("title", f"Small record number {n}"),
            ("creator", f"Author {n % 977}, A."),
            ("date", f"{2000 + n % 24}"),
            ("type", "Text"),
            ("identifier", f"{self.pages}{n}"),
            ("identifier", f"urn:nbn:xx:small-{n}"),
        ):
            etree.SubElement(dc, f"{{{DC}}}{name}").text = value
        return dc

    def get_record_abouts(self, identifier):
        return []

    def list_set_specs(self, identifier=None, cursor=0):
        return None, None, None

    def list_identifiers(self, metadataprefix, filter_from=None, filter_until=None,
                         filter_set=None, cursor=0):
        if filter_set:
            return [], 0, None
        end = min(cursor + self.limit, self.records)
        ids = [f"oai:small.example:{n}" for n in range(cursor + 1, end + 1)]
        return ids, self.records, None


def answer(repository, query):
    args = dict(parse_qsl(query, keep_blank_values=True))
    return bytes(repository.process(args))


def main():
    port, records, page_size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    base_url = f"http://127.0.0.1:{port}/oai/request"
    repository = oai_repo.OAIRepository(Small(base_url, records, page_size))

    # The harvest's answers, made once: Identify, then each ListRecords page in turn.
    kept = {}
    for query in ("verb=Identify", "verb=ListMetadataFormats"):
        kept[query] = answer(repository, query)
    query = "verb=ListRecords&metadataPrefix=oai_dc"
    ns = {"o": "http://www.openarchives.org/OAI/2.0/"}
    while query:
        body = answer(repository, query)
        kept[query] = body
        token = etree.fromstring(body).findtext(".//o:resumptionToken", namespaces=ns)
        query = None
        if token:
            from urllib.parse import quote
            query = f"verb=ListRecords&resumptionToken={quote(token, safe='')}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            parts = urlsplit(self.path)
            if parts.path != "/oai/request":
                self.send_error(404)
                return
            body = kept.get(parts.query)
            if body is None:
                body = answer(repository, parts.query)
            self.send_response(200)
            self.send_header("Content-Type", "text/xml; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
