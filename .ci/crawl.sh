#!/usr/bin/env bash
# A crawler's walk of a running gateway, as a search engine or a CDIF harvester would make it:
# robots.txt, every `Sitemap:` line in it (any group), every file each index lists, and every
# JSON-LD document or list those files list. Fails on any answer other than 200, on a wrong
# media type, on an XML file its schema rejects, and on JSON-LD that does not parse.
#
#   [EXPECT_INDEXES=N] bash .ci/crawl.sh BASE_URL SCHEMAS_DIR WORK_DIR
#
# With EXPECT_INDEXES, robots.txt must announce exactly that many indexes.
set -euo pipefail
base=$1 schemas=$2 work=$3
mkdir -p "$work"
fail() { echo "crawl: $*" >&2; exit 1; }

# GET $1 into $2 (decompressed when the gateway gzips it); prints the Content-Type.
fetch() {
  local out
  out=$(curl -s --compressed --max-time 30 -o "$2" -w '%{http_code} %{content_type}' "$1") ||
    fail "$1: curl failed"
  [ "${out%% *}" = 200 ] || fail "$1 answered ${out%% *}"
  echo "${out#* }"
}

# The `<loc>`s of a sitemap or index file, unescaped (the gateway escapes only `&` in them).
locs() { grep -o '<loc>[^<]*</loc>' "$1" | sed -e 's/<[^>]*>//g' -e 's/&amp;/\&/g' || true; }

# Checks that $1 (from URL $2) validates against schema $3.
validate() {
  xmllint --noout --schema "$3" "$1" 2>/dev/null || {
    xmllint --noout --schema "$3" "$1" 2>&1 | tail -5 >&2
    fail "$2 does not validate against $(basename "$3")"
  }
}

type=$(fetch "${base}robots.txt" "$work/robots.txt")
[[ $type == text/plain* ]] || fail "robots.txt is $type"
mapfile -t indexes < <(sed -n 's/^Sitemap: //p' "$work/robots.txt")
[ ${#indexes[@]} -gt 0 ] || fail "robots.txt announces no sitemap"
if [ -n "${EXPECT_INDEXES:-}" ] && [ ${#indexes[@]} != "$EXPECT_INDEXES" ]; then
  fail "robots.txt announces ${#indexes[@]} indexes, not $EXPECT_INDEXES: ${indexes[*]}"
fi

n=0 docs=0
for index in "${indexes[@]}"; do
  n=$((n + 1))
  type=$(fetch "$index" "$work/index-$n.xml")
  [[ $type == application/xml* ]] || fail "$index is $type"
  validate "$work/index-$n.xml" "$index" "$schemas/siteindex.xsd"
  echo "$index: an index of $(locs "$work/index-$n.xml" | wc -l) file(s)"
  m=0
  mapfile -t shards < <(locs "$work/index-$n.xml")
  for shard in "${shards[@]}"; do
    m=$((m + 1))
    file="$work/shard-$n-$m.xml"
    case $shard in
      *.xml.gz) # a gzip file of its own (application/gzip, no Content-Encoding)
        type=$(fetch "$shard" "$file.gz")
        [ "$type" = application/gzip ] || fail "$shard is $type"
        gunzip -c "$file.gz" >"$file" || fail "$shard is not gzip" ;;
      *)
        type=$(fetch "$shard" "$file")
        [[ $type == application/xml* ]] || fail "$shard is $type" ;;
    esac
    case ${shard##*/} in
      signmap-*) schema=signmap.xsd ;;
      ocx-*) schema=ocx-sitemap.xsd ;;
      *) schema=sitemap.xsd ;;
    esac
    validate "$file" "$shard" "$schemas/$schema"
    # The CDIF sitemaps list the JSON-LD itself: documents, or lists of them.
    case ${shard##*/} in
      cdif-sitemap-*) want='application/ld+json; profile="CDIF1.0"' ;;
      cdif-list-sitemap-*) want='application/ld+json; profile="CDIF-list-1.0"' ;;
      *) continue ;;
    esac
    k=0
    mapfile -t docs_here < <(locs "$file")
    for doc in "${docs_here[@]}"; do
      k=$((k + 1))
      docs=$((docs + 1))
      type=$(fetch "$doc" "$work/doc-$n-$m-$k.jsonld")
      [ "$type" = "$want" ] || fail "$doc is $type, not $want"
    done
  done
done
# One interpreter for every document: each parses, and has the type a document or list has.
python3 - "$work" <<'EOF' || fail "a JSON-LD document is not what CDIF asks for"
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("doc-*.jsonld")):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert "schema.org" in str(doc["@context"]), (path, doc["@context"])
    assert doc.get("@type"), path
    if doc["@type"] == "ItemList":
        assert doc["numberOfItems"] == len(doc["itemListElement"]) > 0, path
        for item in doc["itemListElement"]:
            assert item["item"]["url"].startswith("http"), (path, item["position"])
    else:
        assert doc["url"].startswith("http"), path
EOF
echo "crawled ${#indexes[@]} index(es) and $docs JSON-LD file(s); every file answered and validates"
