"""The gateway's ResourceSync documents read by the reference client, `resync` from PyPI (its
`Client` API, since its command exits 0 on a fatal error): the Source Description leads to the
repository's Capability List, a baseline sync copies the landing pages its Resource List names,
and an incremental sync applies each Change List in order. After each, the destination must hold
exactly the upstream's live landing pages, byte for byte. The Change List Index, which the client
does not read, is read with the library's parser. Fails (exit 1) naming what differs.

    python client.py baseline GATEWAY REPO UPSTREAM DEST RECORDS.json
    python client.py incremental GATEWAY REPO UPSTREAM DEST RECORDS.json CHANGES.json

CHANGES.json: {"created": [ids], "updated": [ids], "deleted": [ids]}, what the Change Lists must
hold since the baseline.
"""
import json
import logging
import os
import sys
import urllib.request

from resync.capability_list import CapabilityList
from resync.change_list import ChangeList
from resync.client import Client, ClientFatalError
from resync.list_base_with_index import ListBaseWithIndex
from resync.resource_list import ResourceList
from resync.source_description import SourceDescription

mode, gateway, repo, upstream, dest, records_file = sys.argv[1:7]
logging.basicConfig(level=logging.ERROR)
pages = upstream + "records/"


def fail(what):
    print(f"resourcesync client: {what}", file=sys.stderr)
    sys.exit(1)


def get(url):
    with urllib.request.urlopen(url) as r:
        return r.read()


# The Source Description names the repository's Capability List.
description = SourceDescription()
description.read(uri=gateway + ".well-known/resourcesync")
capability_lists = [r.uri for r in description.resources if r.capability == "capabilitylist"]
mine = gateway + repo + "/capabilitylist.xml"
if mine not in capability_lists:
    fail(f"the Source Description lists {capability_lists}, not {mine}")
capabilities = CapabilityList()
capabilities.read(uri=mine)
if capabilities.capability != "capabilitylist":
    fail(f"{mine} says capability {capabilities.capability}")
for needed in ("resourcelist", "changelist"):
    if not capabilities.has_capability(needed):
        fail(f"{mine} has no {needed}")
if capabilities.link("up") is None or not capabilities.link("up")["href"].endswith("/.well-known/resourcesync"):
    fail(f"{mine} has no up link to the Source Description: {capabilities.ln}")

client = Client()
client.set_mappings([pages, dest])
client.capability_list_uri = mine
# The landing pages are on the repository's host, the lists on the gateway's: the authority
# rule would have the Source Description on the repository's host (docs/discovery.md's proxy).
client.noauth = True


def live_pages():
    with open(records_file) as f:
        return {str(r["id"]): r for r in json.load(f) if not r["deleted"]}


def check_destination():
    records = live_pages()
    held = sorted(os.listdir(dest)) if os.path.isdir(dest) else []
    if held != sorted(records):
        fail(f"the destination holds {held}, the upstream's live pages are {sorted(records)}")
    for name in held:
        with open(os.path.join(dest, name), "rb") as f:
            if f.read() != get(pages + name):
                fail(f"{name} in the destination is not the upstream's page")


try:
    if mode == "baseline":
        resources = ResourceList()
        resources.read(uri=gateway + repo + "/resourcelist.xml")
        if resources.md.get("capability") != "resourcelist" or not resources.md_at:
            fail(f"the Resource List's rs:md: {resources.md}")
        client.baseline_or_audit(allow_deletion=True)
        check_destination()
        index = b"<sitemapindex" in get(gateway + repo + "/resourcelist.xml")
        print(f"   resync baseline: {len(os.listdir(dest))} landing pages from the Resource List"
              f"{' Index' if index else ''}")
    else:
        with open(sys.argv[7]) as f:
            expected = {kind: {pages + str(i) for i in ids} for kind, ids in json.load(f).items()}
        listed = [r.uri for r in capabilities.resources if r.capability == "changelist"][0]
        if listed.endswith("/changelist-index.xml"):
            # The library's own reader of lists and their indexes, as ChangeList reads them
            # (a ChangeList takes only entries with a change, which an index has not).
            index = ListBaseWithIndex(capability_name="changelist")
            index.read(uri=listed, index_only=True)
            if not index.sitemapindex or index.md.get("capability") != "changelist" or not index.md_from:
                fail(f"{listed} is no Change List Index: {index.md}")
            lists = [r.uri for r in index.resources]
            number = lambda uri: int(uri.rsplit("-", 1)[1].split(".")[0])
            if lists != sorted(lists, key=number):
                fail(f"the Change List Index is not in order: {lists}")
        else:
            lists = [listed]
        seen = {"created": set(), "updated": set(), "deleted": set()}
        last = None
        for uri in lists:
            changes = ChangeList()
            changes.read(uri=uri)
            if changes.md.get("capability") != "changelist" or not changes.md_from:
                fail(f"{uri}'s rs:md: {changes.md}")
            for change in changes:
                if change.ts_datetime is None or change.lastmod is None:
                    fail(f"{uri}: {change.uri} has no datetime or lastmod")
                if last is not None and change.ts_datetime < last:
                    fail(f"{uri}: {change.uri} is out of chronological order")
                last = change.ts_datetime
                seen[change.change].add(change.uri)
            client.incremental(allow_deletion=True, change_list_uri=uri)
        if seen != expected:
            fail(f"the Change Lists hold {seen}, expected {expected}")
        check_destination()
        print(f"   resync incremental: {sum(map(len, seen.values()))} changes from {len(lists)} Change "
              f"List(s){' through the index' if len(lists) > 1 else ''}; the destination is the upstream's")
except ClientFatalError as e:
    fail(f"resync: {e}")
