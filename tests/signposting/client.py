"""A landing page through nginx, read by a third-party Signposting client (the `signposting`
package from PyPI): the Link header's signposts (HEAD, as the client asks), then each linkset the
header names, in both formats, kept to the entries whose anchor is the landing URL (as F-UJI
keeps them). Fails (exit 1) naming what is missing.

    python client.py PAGE_URL LANDING_URL
"""
import sys

import signposting

page, landing = sys.argv[1:3]


def fail(what):
    print(f"signposting client: {what}", file=sys.stderr)
    sys.exit(1)


header = signposting.find_signposting_http(page)
if not header.describedBy:
    fail(f"no describedby in the Link header of {page}: {header}")
if not header.linksets:
    fail(f"no linkset in the Link header of {page}: {header}")
formats = sorted(str(s.type) for s in header.linksets)
if formats != ["application/linkset", "application/linkset+json"]:
    fail(f"the linksets' types: {formats}")
for signpost in header.linksets:
    whole = signposting.find_signposting_linkset(signpost.target, signpost.type)
    mine = whole.for_context(landing)
    if not mine.describedBy:
        fail(f"the {signpost.type} linkset {signpost.target} has no describedby for {landing}: {whole}")
    header_targets = {str(s.target) for s in header.describedBy}
    linkset_targets = {str(s.target) for s in mine.describedBy}
    if header_targets != linkset_targets:
        fail(f"describedby differs: header {header_targets}, {signpost.type} linkset {linkset_targets}")
    if (header.license and (not mine.license or mine.license.target != header.license.target)):
        fail(f"license differs: header {header.license}, {signpost.type} linkset {mine.license}")
rels = sorted({str(s.rel) for s in header})
print(f"   the signposting client reads {rels} from the header, and both linksets for {landing}")
