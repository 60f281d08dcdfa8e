"""A small OAI-PMH repository and its landing pages, for the ResourceSync test (sync.sh): the
records are read from a JSON file at each request, so the test changes the repository by
rewriting it. Identify (seconds granularity, deletedRecord persistent) and ListRecords with
`from` and `until`, one page; each record's landing page is /records/{id}, answered with its
version while it lives and 404 once it is deleted.

    python upstream.py PORT RECORDS.json    (prints "ready" once it listens)

RECORDS.json: [{"id": 1, "datestamp": "2024-01-01T00:00:00Z", "version": 1, "deleted": false}]
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

port, records_file = int(sys.argv[1]), sys.argv[2]
base = f"http://127.0.0.1:{port}/"


def records():
    with open(records_file) as f:
        return json.load(f)


def page(body):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
            '<responseDate>2026-01-01T00:00:00Z</responseDate>'
            f'<request>{escape(base)}oai</request>{body}</OAI-PMH>\n')


def record(r):
    status = ' status="deleted"' if r["deleted"] else ""
    header = (f'<header{status}>'
              f'<identifier>oai:upstream:{r["id"]}</identifier>'
              f'<datestamp>{r["datestamp"]}</datestamp></header>')
    if r["deleted"]:
        return f"<record>{header}</record>"
    return (f"<record>{header}<metadata>"
            '<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f'<dc:title>Record {r["id"]}</dc:title>'
            f'<dc:identifier>{base}records/{r["id"]}</dc:identifier>'
            "</oai_dc:dc></metadata></record>")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="text/xml; charset=utf-8"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path.startswith("/records/"):
            live = {str(r["id"]): r for r in records() if not r["deleted"]}
            r = live.get(url.path[len("/records/"):])
            if r is None:
                return self.answer(404, "gone\n", "text/plain")
            return self.answer(200, f"<html><body>record {r['id']} version {r['version']}</body></html>\n",
                               "text/html; charset=utf-8")
        if url.path != "/oai":
            return self.answer(404, "not found\n", "text/plain")
        args = dict(parse_qsl(url.query))
        verb = args.get("verb")
        if verb == "Identify":
            return self.answer(200, page(
                "<Identify><repositoryName>Upstream</repositoryName>"
                f"<baseURL>{escape(base)}oai</baseURL><protocolVersion>2.0</protocolVersion>"
                "<adminEmail>a@upstream.example</adminEmail>"
                "<earliestDatestamp>2020-01-01T00:00:00Z</earliestDatestamp>"
                "<deletedRecord>persistent</deletedRecord>"
                "<granularity>YYYY-MM-DDThh:mm:ssZ</granularity></Identify>"))
        if verb == "ListRecords":
            since, until = args.get("from", ""), args.get("until", "")
            # Datestamps of one granularity and format compare as text.
            chosen = [r for r in records()
                      if (not since or r["datestamp"] >= since) and (not until or r["datestamp"] <= until)]
            if not chosen:
                return self.answer(200, page('<error code="noRecordsMatch">none</error>'))
            return self.answer(200, page("<ListRecords>" + "".join(map(record, chosen)) + "</ListRecords>"))
        return self.answer(200, page(f'<error code="badVerb">{escape(str(verb))}</error>'))


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("ready", flush=True)
server.serve_forever()
