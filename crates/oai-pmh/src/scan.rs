//! The fast path for `ListRecords` pages: a hand-written scanner that yields exactly the
//! [`ListPage`] of the quick-xml reader in [`super::parse`], or declines the page.
//!
//! Why by hand: the harvest's CPU budget is 3 CPU-seconds per million records (about 2.1 GB of
//! XML), and page parsing dominated it. On the 818 KB, 500-record benchmark page (the root package's
//! `cargo bench --bench render -- parse`, which includes `prepare`), the quick-xml reader, with its
//! tokenizer, its UTF-8 re-validation of every event and our dispatch, runs at 0.55-1.0 GiB/s
//! depending on the load of the shared machine, about 13.5 million instructions per page
//! (callgrind). With this scanner the same benchmark runs at about 2.5 GiB/s, 5.9 million
//! instructions per page, of which `prepare` takes 1.2 million. It is that much faster because
//! it is specialised to what OAI-PMH pages contain: the text is already valid UTF-8 (checked once
//! by `prepare`), memchr jumps between `<` and `&`, names are ASCII and repeat (a name met before
//! is recognised by comparing words, not scanned byte by byte), each spelling of a namespace
//! name is classified once per page, and an end tag is one comparison with the open element's
//! name.
//!
//! quick-xml stays the reference and the fallback. The scanner returns `None` for anything it
//! does not fully handle (a DOCTYPE, CDATA, a processing instruction other than the leading XML
//! declaration, an entity other than the five predefined ones and character references,
//! non-ASCII names, an undeclared element prefix, a duplicate attribute, unquoted or unseparated
//! attributes, a mismatched or spaced end tag, truncation, text outside the root, nesting beyond
//! `MAX_DEPTH`), and the quick-xml reader then reads the page or reports the error. So
//! correctness never depends on the scanner handling odd input, only on it never returning a
//! different `Some`; the tests below check that differentially against quick-xml. A declined
//! page costs the scan up to the point of declining on top of the quick-xml read: at worst (an
//! odd construct at the very end) about a third more than quick-xml alone.
//!
//! Matching quick-xml exactly means matching its details too: text is taken raw (no end-of-line
//! normalisation, so a `\r\n` inside a value stays), attribute values are normalised (TAB, LF,
//! CR and CRLF become one space each, references are resolved), and namespaces are resolved with
//! the same rules as `Scopes` (including the count of `https://` aliases per element).

use std::borrow::Cow;

use memchr::{memchr, memchr2, memmem};

use super::parse::{
    Contexts, Fields, ListPage, MAX_DEPTH, Ns, Quirks, classify_uri, legal_xml_char,
};

/// Reads a page that [`super::parse::prepare`] has prepared: the same [`ListPage`] as the
/// quick-xml reader, or `None` when the page holds anything this scanner does not handle.
/// `quirks` are those counted by `prepare`.
pub(crate) fn scan_list_records(text: &str, quirks: Quirks, fields: Fields) -> Option<ListPage> {
    let mut scanner = Scanner {
        text,
        pos: 0,
        open: Vec::with_capacity(16),
        bindings: Vec::with_capacity(8),
        classified: Vec::with_capacity(MAX_CLASSIFIED),
        names: [None; NAME_SLOTS],
        attrs: Vec::with_capacity(8),
        repeat: RepeatTag {
            text: "",
            // No name is empty: matches nothing until a tag is remembered.
            name_len: 0,
            attrs: Vec::with_capacity(8),
            declares: false,
            empty: false,
        },
        contexts: Contexts::new(quirks, text.len(), fields),
    };
    scanner.document()?;
    Some(scanner.contexts.finish())
}

/// Attributes on one element beyond which the scanner declines (the duplicate check is
/// quadratic); real OAI-PMH elements carry at most a handful.
const MAX_ATTRIBUTES: usize = 32;

/// Slots of the table of element names met (a power of two).
const NAME_SLOTS: usize = 64;

/// Distinct namespace names whose classification the scanner remembers.
const MAX_CLASSIFIED: usize = 8;

/// A namespace binding in scope, classified once when declared.
struct Binding<'t> {
    /// Depth of the declaring element.
    depth: usize,
    prefix: &'t str,
    ns: Ns,
    /// Declared with an `https://` alias (OAI-43).
    https: bool,
}

/// An attribute of the tag being read.
#[derive(Clone, Copy)]
struct Attr<'t> {
    name: &'t str,
    /// The value between the quotes, unnormalised; its references have been checked.
    raw: &'t str,
}

/// A start tag with attributes as read once, so that the same bytes again (the `oai_dc:dc` tag
/// with its namespace declarations and schema location opens every record) are not read again:
/// reading a tag depends on nothing but its bytes.
struct RepeatTag<'t> {
    /// From `<` to `>`.
    text: &'t str,
    /// Length of the qualified name.
    name_len: usize,
    attrs: Vec<Attr<'t>>,
    declares: bool,
    empty: bool,
}

/// The scanner's state: where it is in the text, the names and namespaces in scope, and the
/// contexts of the page it is in, which the quick-xml reader keeps alike.
struct Scanner<'t> {
    text: &'t str,
    /// Byte offset of the next unread byte.
    pos: usize,
    /// Qualified names of the open elements; the depth is its length.
    open: Vec<&'t str>,
    bindings: Vec<Binding<'t>>,
    /// Namespace names as spelled in the page (unnormalised), classified.
    classified: Vec<(&'t str, Ns, bool)>,
    /// Element names met in this page, by a hash of their first 8 bytes: checking that the
    /// bytes at `<` repeat one is cheaper than scanning a name byte by byte.
    names: [Option<(&'t str, Option<usize>)>; NAME_SLOTS],
    /// Attributes of the current start tag.
    attrs: Vec<Attr<'t>>,
    /// The last start tag read that had attributes, whole, with what reading it found.
    repeat: RepeatTag<'t>,
    /// What the elements read so far mean, and the page read from them.
    contexts: Contexts,
}

/// XML whitespace, as quick-xml and the XML spec define it.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Whether two short byte strings (names, prefixes) are equal. Written out because a `==` on
/// slices calls `memcmp`, whose call overhead made name comparisons half the scanner's time.
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap());
        let mut i = 0;
        while i + 8 < n {
            if word(a, i) != word(b, i) {
                return false;
            }
            i += 8;
        }
        // The last (possibly overlapping) word.
        word(a, n - 8) == word(b, n - 8)
    } else {
        a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
    }
}

/// Character classes of ASCII name bytes: 1 may start a name, 2 may follow, 3 is the colon.
/// Anything else (including every non-ASCII byte) ends a name, or makes the scanner decline.
const NAME_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = if c.is_ascii_alphabetic() || c == b'_' {
            1
        } else if c.is_ascii_digit() || c == b'-' || c == b'.' {
            2
        } else if c == b':' {
            3
        } else {
            0
        };
        b += 1;
    }
    table
};

/// The end of the name starting at `bytes[start]` and the offset of its colon, if any: an ASCII
/// name with at most one colon, which separates two non-empty parts. `None` for anything else.
fn name(bytes: &[u8], start: usize) -> Option<(usize, Option<usize>)> {
    let rest = bytes.get(start..)?;
    if NAME_CLASS[usize::from(*rest.first()?)] != 1 {
        return None;
    }
    // One table lookup per byte: this loop runs over every name of every page.
    let (mut len, mut colons, mut colon) = (rest.len(), 0, 0);
    for (i, &b) in rest.iter().enumerate() {
        match NAME_CLASS[usize::from(b)] {
            0 => {
                len = i;
                break;
            }
            3 => {
                colons += 1;
                colon = i;
            }
            _ => {}
        }
    }
    match colons {
        0 => Some((start + len, None)),
        1 if colon + 1 < len && NAME_CLASS[usize::from(rest[colon + 1])] == 1 => {
            Some((start + len, Some(colon)))
        }
        _ => None,
    }
}

/// The character a reference at `bytes[0] == b'&'` stands for, and the reference's length: one of
/// the five predefined entities, or a decimal or (lowercase `x`) hexadecimal character reference
/// to a character XML 1.0 allows. `None` for anything else, including forms quick-xml would also
/// accept (leading zeros beyond 7 digits): the scanner declines rather than guess.
fn reference(bytes: &[u8]) -> Option<(char, usize)> {
    let rest = bytes.get(1..)?;
    if let Some(num) = rest.strip_prefix(b"#") {
        let (radix, digits, max) = match num.strip_prefix(b"x") {
            Some(hex) => (16, hex, 6),
            None => (10, num, 7),
        };
        let mut code = 0u32;
        let mut n = 0;
        while let Some(d) = digits.get(n).and_then(|&d| char::from(d).to_digit(radix)) {
            code = code * radix + d;
            n += 1;
            if n > max {
                return None;
            }
        }
        if n == 0 || digits.get(n) != Some(&b';') || !legal_xml_char(code) {
            return None;
        }
        let len = bytes.len() - digits.len() + n + 1;
        return char::from_u32(code).map(|c| (c, len));
    }
    let (c, name): (char, &[u8]) = match rest.first()? {
        b'a' if rest.starts_with(b"amp;") => ('&', b"amp;"),
        b'a' => ('\'', b"apos;"),
        b'l' => ('<', b"lt;"),
        b'g' => ('>', b"gt;"),
        b'q' => ('"', b"quot;"),
        _ => return None,
    };
    rest.starts_with(name).then_some((c, name.len() + 1))
}

/// Checks an attribute value: no `<`, and only references [`reference`] resolves.
fn check_value(raw: &str) -> Option<()> {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while let Some(off) = memchr2(b'<', b'&', &bytes[i..]) {
        let at = i + off;
        if bytes[at] == b'<' {
            return None;
        }
        i = at + reference(&bytes[at..])?.1;
    }
    Some(())
}

/// An attribute value as quick-xml's `normalized_value` gives it (XML 1.0): references
/// resolved, and each TAB, LF, CR or CRLF replaced by one space.
fn normalize(raw: &str) -> Option<Cow<'_, str>> {
    let bytes = raw.as_bytes();
    if !bytes
        .iter()
        .any(|&b| matches!(b, b'\t' | b'\n' | b'\r' | b'&'))
    {
        return Some(Cow::Borrowed(raw));
    }
    let mut out = String::with_capacity(raw.len());
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        let step = match bytes[i] {
            b'\t' | b'\n' => {
                out.push_str(&raw[copied..i]);
                out.push(' ');
                1
            }
            b'\r' => {
                out.push_str(&raw[copied..i]);
                out.push(' ');
                if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                }
            }
            b'&' => {
                out.push_str(&raw[copied..i]);
                let (c, len) = reference(&bytes[i..])?;
                out.push(c);
                len
            }
            _ => {
                i += 1;
                continue;
            }
        };
        i += step;
        copied = i;
    }
    out.push_str(&raw[copied..]);
    Some(Cow::Owned(out))
}

impl<'t> Scanner<'t> {
    /// The whole document: an optional XML declaration, comments and whitespace, the root, and
    /// comments and whitespace again up to the end.
    fn document(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        if bytes.starts_with(b"<?xml") && bytes.get(5).is_some_and(|&b| is_ws(b)) {
            // Like quick-xml, the declaration ends at the first `?>`; its content is not read.
            self.pos = 5 + memmem::find(&bytes[5..], b"?>")? + 2;
        }
        self.misc()?;
        self.start_tag()?;
        if !self.open.is_empty() {
            self.content()?;
        }
        self.misc()?;
        (self.pos == bytes.len()).then_some(())
    }

    /// Skips whitespace and comments, stopping at anything else.
    fn misc(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        loop {
            while bytes.get(self.pos).copied().is_some_and(is_ws) {
                self.pos += 1;
            }
            if !bytes[self.pos..].starts_with(b"<!--") {
                return Some(());
            }
            self.comment()?;
        }
    }

    /// Skips the comment at `pos`. Like quick-xml, it ends at the first `-->` after the `<!--`
    /// (so `<!-->` and `<!--->` do not end it).
    fn comment(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        if !bytes[self.pos..].starts_with(b"<!--") {
            return None;
        }
        self.pos += 4 + memmem::find(&bytes[self.pos + 4..], b"-->")? + 3;
        Some(())
    }

    /// Everything inside the root: text, references, elements and comments, up to the root's
    /// end tag.
    fn content(&mut self) -> Option<()> {
        let text = self.text;
        let bytes = text.as_bytes();
        loop {
            // Between tags there is often no text at all.
            let at = match bytes.get(self.pos) {
                Some(b'<') => self.pos,
                _ => self.pos + memchr2(b'<', b'&', bytes.get(self.pos..)?)?,
            };
            self.contexts.text(&text[self.pos..at]);
            if bytes[at] == b'&' {
                // Resolved everywhere, as quick-xml does: an unknown entity fails the page even
                // where its text is not kept.
                let (c, len) = reference(&bytes[at..])?;
                self.contexts.char(c);
                self.pos = at + len;
                continue;
            }
            self.pos = at;
            match bytes.get(at + 1) {
                Some(b'/') => {
                    self.end_tag()?;
                    if self.open.is_empty() {
                        return Some(());
                    }
                }
                Some(b'!') => self.comment()?,
                _ => self.start_tag()?,
            }
        }
    }

    /// The start or empty-element tag at `pos`.
    fn start_tag(&mut self) -> Option<()> {
        let text = self.text;
        let bytes = text.as_bytes();
        if bytes.get(self.pos) != Some(&b'<') {
            return None;
        }
        let name_start = self.pos + 1;
        let (name_end, colon) = match self.known_name(name_start) {
            Some(known) => known,
            None => {
                let (end, colon) = name(bytes, name_start)?;
                self.remember_name(name_start, end, colon);
                (end, colon)
            }
        };
        let qname = &text[name_start..name_end];
        let r = &self.repeat;
        let (i, declares, empty) = if r.name_len == qname.len()
            && same(&r.text.as_bytes()[1..=qname.len()], qname.as_bytes())
            && bytes
                .get(self.pos..self.pos + r.text.len())
                .is_some_and(|t| t == r.text.as_bytes())
        {
            self.attrs.clear();
            self.attrs.extend_from_slice(&r.attrs);
            (self.pos + r.text.len(), r.declares, r.empty)
        } else {
            let read = self.attributes(name_end)?;
            if !self.attrs.is_empty() {
                let (end, declares, empty) = read;
                let r = &mut self.repeat;
                r.text = &text[self.pos..end];
                r.name_len = qname.len();
                r.attrs.clear();
                r.attrs.extend_from_slice(&self.attrs);
                r.declares = declares;
                r.empty = empty;
            }
            read
        };
        self.pos = i;
        let depth = self.open.len() + 1;
        if depth > MAX_DEPTH {
            return None;
        }
        if declares {
            self.declare(depth)?;
        }
        let (prefix, local) = match colon {
            Some(c) => (&qname[..c], &qname[c + 1..]),
            None => ("", qname),
        };
        let ns = self.resolve(prefix)?;
        self.start(ns, local, depth)?;
        if empty {
            self.contexts.close(depth);
            self.forget(depth);
        } else {
            self.open.push(qname);
        }
        Some(())
    }

    /// Reads the attributes of the start tag whose name ends at `name_end` into `attrs`: the
    /// offset after the tag's `>`, whether it declares namespaces, and whether it is empty.
    fn attributes(&mut self, name_end: usize) -> Option<(usize, bool, bool)> {
        let text = self.text;
        let bytes = text.as_bytes();
        self.attrs.clear();
        let mut declares = false;
        let mut i = name_end;
        let empty = loop {
            let before = i;
            while bytes.get(i).copied().is_some_and(is_ws) {
                i += 1;
            }
            match *bytes.get(i)? {
                b'>' => {
                    i += 1;
                    break false;
                }
                b'/' if bytes.get(i + 1) == Some(&b'>') => {
                    i += 2;
                    break true;
                }
                // Attributes must be separated by whitespace (quick-xml does not insist).
                _ if i == before || self.attrs.len() == MAX_ATTRIBUTES => return None,
                _ => {
                    let (key_end, _) = name(bytes, i)?;
                    let key = &text[i..key_end];
                    i = key_end;
                    while bytes.get(i).copied().is_some_and(is_ws) {
                        i += 1;
                    }
                    if bytes.get(i) != Some(&b'=') {
                        return None;
                    }
                    i += 1;
                    while bytes.get(i).copied().is_some_and(is_ws) {
                        i += 1;
                    }
                    let quote = *bytes.get(i)?;
                    if quote != b'"' && quote != b'\'' {
                        return None;
                    }
                    let value_start = i + 1;
                    let value_end = value_start + memchr(quote, &bytes[value_start..])?;
                    let raw = &text[value_start..value_end];
                    check_value(raw)?;
                    if self.attrs.iter().any(|a| a.name == key) {
                        return None;
                    }
                    declares |= key.starts_with("xmlns");
                    self.attrs.push(Attr { name: key, raw });
                    i = value_end + 1;
                }
            }
        };
        Some((i, declares, empty))
    }

    /// The slot in `names` of the name starting at `bytes[start]`, from its first 8 bytes.
    fn name_slot(&self, start: usize) -> Option<usize> {
        let first = self.text.as_bytes().get(start..start + 8)?;
        let word = u64::from_le_bytes(first.try_into().unwrap());
        Some(
            (word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - NAME_SLOTS.trailing_zeros()))
                as usize,
        )
    }

    /// What [`name`] would return for the name starting at `start`, if it is one met before: the
    /// same bytes, followed by a byte that cannot continue a name.
    fn known_name(&self, start: usize) -> Option<(usize, Option<usize>)> {
        let bytes = self.text.as_bytes();
        let (known, colon) = self.names[self.name_slot(start)?]?;
        let end = start + known.len();
        (same(bytes.get(start..end)?, known.as_bytes())
            && NAME_CLASS[usize::from(*bytes.get(end)?)] == 0)
            .then_some((end, colon))
    }

    fn remember_name(&mut self, start: usize, end: usize, colon: Option<usize>) {
        if let Some(slot) = self.name_slot(start) {
            self.names[slot] = Some((&self.text[start..end], colon));
        }
    }

    /// The end tag at `pos`: exactly `</name>` for the innermost open element.
    fn end_tag(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let name = *self.open.last()?;
        let start = self.pos + 2;
        let end = start + name.len();
        if !same(bytes.get(start..end)?, name.as_bytes()) || bytes.get(end) != Some(&b'>') {
            return None;
        }
        self.pos = end + 1;
        let depth = self.open.len();
        self.contexts.close(depth);
        self.forget(depth);
        self.open.pop();
        Some(())
    }

    /// Records the `xmlns` declarations of the current tag, as `Scopes::declare` does.
    fn declare(&mut self, depth: usize) -> Option<()> {
        for attr in &self.attrs {
            let prefix = match attr.name.strip_prefix("xmlns") {
                Some("") => "",
                Some(rest) => match rest.strip_prefix(':') {
                    Some(prefix) => prefix,
                    None => continue,
                },
                None => continue,
            };
            // Pages repeat the same declarations on every record: classify each spelling once.
            let known = self
                .classified
                .iter()
                .find(|(raw, _, _)| same(raw.as_bytes(), attr.raw.as_bytes()));
            let (ns, https) = match known {
                Some(&(_, ns, https)) => (ns, https),
                None => {
                    let (ns, https) = classify_uri(normalize(attr.raw)?.trim());
                    if self.classified.len() < MAX_CLASSIFIED {
                        self.classified.push((attr.raw, ns, https));
                    }
                    (ns, https)
                }
            };
            self.bindings.push(Binding {
                depth,
                prefix,
                ns,
                https,
            });
        }
        Some(())
    }

    /// Forgets the declarations of elements at `depth` or deeper.
    fn forget(&mut self, depth: usize) {
        while self.bindings.last().is_some_and(|b| b.depth >= depth) {
            self.bindings.pop();
        }
    }

    /// The namespace of an element prefix, counting `https://` aliases as `Scopes::resolve`
    /// does; `None` (decline) for an undeclared prefix.
    fn resolve(&mut self, prefix: &str) -> Option<Ns> {
        let found = self
            .bindings
            .iter()
            .rev()
            .find(|b| same(b.prefix.as_bytes(), prefix.as_bytes()));
        match found {
            Some(b) => {
                if b.https {
                    self.contexts.quirks().https_namespaces += 1;
                }
                Some(b.ns)
            }
            None if prefix.is_empty() => Some(Ns::None),
            None => None,
        }
    }

    /// Handles the start of an element at `depth`: the root, or what the contexts make of an
    /// element below it.
    #[inline]
    fn start(&mut self, ns: Ns, local: &str, depth: usize) -> Option<()> {
        if depth == 1 {
            // The scanner never reads a second top-level element, and declines a root that is
            // not OAI-PMH: the fallback describes it.
            return self.contexts.root(ns, local).then_some(());
        }
        let attrs = &self.attrs;
        self.contexts
            .start(ns, local, depth, |name| attr(attrs, name));
        Some(())
    }
}

/// The normalised value of an unprefixed attribute of `attrs`.
fn attr<'t>(attrs: &[Attr<'t>], name: &str) -> Option<Cow<'t, str>> {
    attrs
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| normalize(a.raw))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::test_runner::Config as ProptestConfig;

    use super::*;
    use crate::HarvestErrorKind;
    use crate::parse::{
        DC_NS, DcElement, Fields, OAI_DC_NS, OAI_NS, OaiError, STATIC_NS, parse_with_quick_xml,
        prepare,
    };
    use crate::read::parse_list_records;

    /// Both readers on the same prepared text.
    fn both(doc: &str) -> (Option<ListPage>, Result<ListPage, HarvestErrorKind>) {
        let mut quirks = Quirks::default();
        let text = prepare(doc.as_bytes(), &mut quirks).unwrap();
        (
            scan_list_records(&text, quirks, Fields::default()),
            parse_with_quick_xml(&text, quirks, doc.len(), Fields::default()),
        )
    }

    /// The scanner takes `doc` and agrees with quick-xml; returns the page.
    fn check(doc: &str) -> ListPage {
        let (fast, reference) = both(doc);
        let fast = fast.unwrap_or_else(|| panic!("declined:\n{doc}"));
        assert_eq!(Ok(&fast), reference.as_ref(), "{doc}");
        fast
    }

    /// The scanner declines `doc`; returns what the whole parse (the fallback) makes of it.
    fn declines(doc: &str) -> Result<ListPage, HarvestErrorKind> {
        let (fast, reference) = both(doc);
        assert_eq!(fast, None, "{doc}");
        assert_eq!(parse_list_records(doc.as_bytes()), reference);
        reference
    }

    const DC_OPEN: &str = r#"<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">"#;

    fn envelope(inner: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH xmlns=\"{OAI_NS}\">\n  \
             <responseDate>2026-01-01T00:00:00Z</responseDate>\n  \
             <request verb=\"ListRecords\" metadataPrefix=\"oai_dc\">https://h/oai</request>\n  {inner}\n</OAI-PMH>\n"
        )
    }

    /// A page with one record whose oai_dc metadata holds `dc`.
    fn one_record(dc: &str) -> String {
        envelope(&format!(
            "<ListRecords><record><header><identifier>oai:h:1</identifier><datestamp>2020-01-02</datestamp>\
             <setSpec>a</setSpec></header><metadata>{DC_OPEN}<dc:title>T</dc:title>{dc}</oai_dc:dc></metadata></record>\
             <resumptionToken completeListSize=\"10\" cursor=\"0\">tok</resumptionToken></ListRecords>"
        ))
    }

    /// Extended fields: both readers capture every other DC element, in order, trimmed and
    /// unescaped; without the flag, neither does.
    #[test]
    fn extended_fields_are_read_alike() {
        let doc = one_record(
            "<dc:type>info:eu-repo/semantics/article</dc:type><dc:creator>M\u{fc}ller, A.</dc:creator>\
             <dc:rights> https://creativecommons.org/licenses/by/4.0/ </dc:rights><dc:identifier>https://h/x</dc:identifier>\
             <dc:description>a &lt; b &amp; c</dc:description><dc:unknown>z</dc:unknown><dc:type/>",
        );
        let mut quirks = Quirks::default();
        let text = prepare(doc.as_bytes(), &mut quirks).unwrap();
        let fields = Fields::ALL;
        let fast = scan_list_records(&text, quirks, fields).expect("taken");
        let reference = parse_with_quick_xml(&text, quirks, doc.len(), fields).unwrap();
        assert_eq!(fast, reference);
        let r = &fast.records[0];
        assert_eq!(
            r.dc.iter().collect::<Vec<_>>(),
            [
                (DcElement::Title, "T"),
                (DcElement::Type, "info:eu-repo/semantics/article"),
                (DcElement::Creator, "M\u{fc}ller, A."),
                (
                    DcElement::Rights,
                    "https://creativecommons.org/licenses/by/4.0/"
                ),
                (DcElement::Description, "a < b & c"),
            ]
        );
        assert_eq!(r.dc_identifiers, ["https://h/x"]);
        assert!(check(&doc).records[0].dc.is_empty());
    }

    #[test]
    fn reads_a_typical_page() {
        let page = check(&one_record(
            "<dc:identifier> https://h/x?a=1&amp;b=2 </dc:identifier><dc:identifier>doi:10.1/2</dc:identifier>",
        ));
        assert_eq!(page.response_date.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(page.records[0].identifier, "oai:h:1");
        assert_eq!(page.records[0].sets, ["a"]);
        assert_eq!(
            page.records[0].dc_identifiers,
            ["https://h/x?a=1&b=2", "doi:10.1/2"]
        );
        let token = page.token.unwrap();
        assert_eq!(
            (token.value.as_str(), token.complete_list_size, token.cursor),
            ("tok", Some(10), Some(0))
        );
    }

    /// Q-35: an empty `<metadata/>` (B2SHARE) is told apart from oai_dc without a
    /// `dc:identifier`, alike by both readers; a deleted record's is not unreadable.
    #[test]
    fn empty_metadata_is_told_from_metadata_without_identifiers() {
        let record = |status: &str, metadata: &str| {
            envelope(&format!(
                "<ListRecords><record><header{status}><identifier>oai:h:1</identifier>\
                 <datestamp>2020-01-02</datestamp></header>{metadata}</record></ListRecords>"
            ))
        };
        let without_identifier = format!("<metadata>{DC_OPEN}</oai_dc:dc></metadata>");
        for (metadata, empty) in [
            ("<metadata/>", true),
            ("<metadata>\n  </metadata>", true),
            ("<metadata>text only</metadata>", true),
            (without_identifier.as_str(), false),
            ("<metadata><other/></metadata>", false),
            ("", false),
        ] {
            let page = check(&record("", metadata));
            assert_eq!(page.records[0].empty_metadata, empty, "{metadata}");
            assert_eq!(page.records[0].unreadable(), empty, "{metadata}");
            assert!(page.records[0].dc_identifiers.is_empty());
            let deleted = check(&record(" status=\"deleted\"", metadata));
            assert!(!deleted.records[0].unreadable(), "{metadata}");
        }
    }

    #[test]
    fn namespace_declaration_styles() {
        let https = OAI_NS.replace("http:", "https:");
        for doc in [
            // Prefixed OAI elements, declarations on each dc element.
            format!(
                r#"<oai:OAI-PMH xmlns:oai="{OAI_NS}"><oai:ListRecords><oai:record><oai:header><oai:identifier>i</oai:identifier></oai:header><oai:metadata><d:dc xmlns:d="{OAI_DC_NS}"><e:identifier xmlns:e="{DC_NS}">x</e:identifier></d:dc></oai:metadata></oai:record></oai:ListRecords></oai:OAI-PMH>"#
            ),
            // Declarations on the record; default namespaces on the dc elements.
            format!(
                r#"<OAI-PMH xmlns="{OAI_NS}"><ListRecords><record xmlns:dc="{DC_NS}"><header><identifier>i</identifier></header><metadata><dc xmlns="{OAI_DC_NS}"><identifier xmlns="{DC_NS}">x</identifier><identifier>oai_dc, not dc</identifier><dc:identifier>y</dc:identifier></dc></metadata></record></ListRecords></OAI-PMH>"#
            ),
            // https aliases: counted once per element resolved through them.
            format!(
                r#"<OAI-PMH xmlns="{https}"><ListRecords><record><header><identifier>i</identifier></header><metadata><oai_dc:dc xmlns:oai_dc="https://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="https://purl.org/dc/elements/1.1/"><dc:identifier>x</dc:identifier></oai_dc:dc></metadata></record></ListRecords></OAI-PMH>"#
            ),
            // Undeclaring the default namespace: `identifier` is no longer an OAI element.
            format!(
                r#"<OAI-PMH xmlns="{OAI_NS}"><ListRecords><record><header><identifier xmlns="">no</identifier><identifier>i</identifier></header></record></ListRecords></OAI-PMH>"#
            ),
            // A prefix rebound deeper, and a prefix bound to nothing.
            format!(
                r#"<o:OAI-PMH xmlns:o="{OAI_NS}" xmlns:p=""><o:ListRecords><o:record><o:header><o:identifier xmlns:o="urn:x">no</o:identifier><o:identifier>i</o:identifier><p:setSpec>no</p:setSpec></o:header></o:record></o:ListRecords></o:OAI-PMH>"#
            ),
            // Whitespace around `=`, single quotes, references in namespace names.
            r#"<OAI-PMH xmlns = 'http://www.openarchives.org/OAI/2.0&#x2F;'><ListRecords><record><header><identifier>i</identifier></header></record></ListRecords></OAI-PMH>"#.to_owned(),
        ] {
            let page = check(&doc);
            assert_eq!(page.records[0].identifier, "i", "{doc}");
        }
        let page = check(&format!(
            r#"<OAI-PMH xmlns="{https}"><ListRecords><record><header><identifier>i</identifier></header><metadata><oai_dc:dc xmlns:oai_dc="https://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="https://purl.org/dc/elements/1.1/"><dc:identifier>x</dc:identifier></oai_dc:dc></metadata></record></ListRecords></OAI-PMH>"#
        ));
        assert_eq!(page.quirks.https_namespaces, 8);
    }

    #[test]
    fn documents_without_namespace_and_static_repositories() {
        let page = check(
            "<OAI-PMH><ListRecords><record><header status='deleted'><identifier>i</identifier></header></record></ListRecords></OAI-PMH>",
        );
        assert!(page.quirks.no_namespace && page.records[0].deleted);
        assert_eq!(check("<OAI-PMH/>").records, []);
        let page = check(&format!(
            r#"<Repository xmlns="{STATIC_NS}" xmlns:oai="{OAI_NS}"><Identify/><ListRecords metadataPrefix="oai_dc"><oai:record><oai:header><oai:identifier>i</oai:identifier></oai:header></oai:record></ListRecords></Repository>"#
        ));
        assert!(page.is_static);
        assert_eq!(page.records[0].identifier, "i");
        // The workspace's sample repository (its `fixtures/`, two folders up).
        let sample = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/sample-repository.xml"),
        )
        .unwrap();
        let page = check(std::str::from_utf8(&sample).unwrap());
        assert!(page.records.len() > 100);
    }

    #[test]
    fn attributes_text_and_references() {
        // Attribute values are normalised (CRLF is one space), text is kept raw (no EOL
        // normalisation) and trimmed at both ends only.
        let doc = envelope(
            "<ListRecords><record><header status=\"dele&#116;ed\"><identifier>a\r\n&#x42;&lt;&#10;\r\n</identifier>\
             <datestamp>\n2020-01-02 </datestamp><setSpec> s&apos;&quot;&gt; </setSpec></header></record>\
             <resumptionToken completeListSize='&#32;1&#48;' cursor=\"\r\n5\t\">\n t \n</resumptionToken></ListRecords>",
        );
        let page = check(&doc);
        let r = &page.records[0];
        assert!(r.deleted);
        assert_eq!(r.identifier, "a\r\nB<");
        assert_eq!(r.sets, ["s'\">"]);
        assert!(r.datestamp.is_some());
        let token = page.token.unwrap();
        assert_eq!(
            (token.value.as_str(), token.complete_list_size, token.cursor),
            ("t", Some(10), Some(5))
        );
        // Markup and comments inside a captured value: their text is kept.
        let page = check(&one_record(
            "<dc:identifier>a<b>c<!-- x --></b>&#x64;<e/></dc:identifier><dc:identifier/><dc:identifier> </dc:identifier>",
        ));
        assert_eq!(page.records[0].dc_identifiers, ["acd"]);
        // An empty token with attributes ends the list.
        let page = check(&envelope(
            r#"<ListRecords><resumptionToken completeListSize="1" cursor="0"/></ListRecords>"#,
        ));
        assert_eq!(page.token.unwrap().value, "");
    }

    #[test]
    fn errors_comments_and_unknown_elements() {
        let page = check(&envelope(
            "<!-- a --><error code=\"bad&amp;Argument\"> x </error><!---->\
             <ListRecords><record><header><identifier>i</identifier></header></record></ListRecords>",
        ));
        assert_eq!(
            page.errors,
            [OaiError {
                code: "bad&Argument".into(),
                message: "x".into()
            }]
        );
        assert!(page.records.is_empty());
        let doc = one_record(
            "<x:y xmlns:x=\"urn:x\"><z>1</z></x:y><dc:identifier>https://h/x</dc:identifier>",
        );
        check(&(doc.replace("\n<OAI-PMH", "<!-- before -->\n<OAI-PMH") + "<!-- after --->\n"));
        // A comment before the XML declaration makes it a processing instruction.
        declines(&format!("<!-- c -->{}", one_record(""))).unwrap();
        check(&one_record("<dc:identifier>a<!--->-->b</dc:identifier>"));
    }

    #[test]
    fn declines_what_it_does_not_handle() {
        let doc = one_record("<dc:identifier>https://h/x</dc:identifier>");
        let with = |from: &str, to: &str| {
            assert!(doc.contains(from));
            doc.replacen(from, to, 1)
        };
        // Handled by the fallback, with the same result as always.
        let cdata = declines(&with(
            "<dc:title>T</dc:title>",
            "<dc:title><![CDATA[<T>]]></dc:title>",
        ));
        assert_eq!(cdata.unwrap().records[0].dc_identifiers, ["https://h/x"]);
        declines(&with("<OAI-PMH", "<!DOCTYPE OAI-PMH>\n<OAI-PMH")).unwrap();
        declines(&with("<ListRecords>", "<?pi x?><ListRecords>")).unwrap();
        declines(&with("<?xml", "<?xml-stylesheet href='x'?><?xml")).unwrap();
        declines(&with("<ListRecords>", "<ListRecords a=\"1\"b=\"2\">")).unwrap();
        declines(&with("</record>", "</record >")).unwrap();
        declines(&with("<dc:title>T</dc:title>", "<dc:tïtle>T</dc:tïtle>")).unwrap();
        declines(&with("<dc:title>T</dc:title>", "<u:title>T</u:title>")).unwrap();
        declines(&with("<dc:title>T</dc:title>", "<a:b:c/>")).unwrap();
        declines(&with(
            "<dc:title>T</dc:title>",
            "<dc:title>&#X41;</dc:title>",
        ))
        .unwrap_err();
        declines(&with(
            "<dc:title>T</dc:title>",
            "<dc:title>&#00000065;</dc:title>",
        ))
        .unwrap();
        declines(&with("</OAI-PMH>\n", "</OAI-PMH>\n<OAI-PMH/>")).unwrap();
        declines(&with("</OAI-PMH>\n", "</OAI-PMH>\ntext")).unwrap();
        declines(&with("<ListRecords>", "<ListRecords x=\"<\">")).unwrap();
        // Errors the fallback reports.
        declines(&with(
            "<dc:title>T</dc:title>",
            "<dc:title>&nbsp;</dc:title>",
        ))
        .unwrap_err();
        declines(&with(
            "<dc:title>T</dc:title>",
            "<dc:title>A & B</dc:title>",
        ))
        .unwrap_err();
        declines(&with("<dc:title>T</dc:title>", "<dc:title>T</dc:titel>")).unwrap_err();
        declines(&with("<header>", "<header status=deleted>")).unwrap();
        declines(&with("<header>", "<header a=\"1\" a=\"2\">")).unwrap();
        declines(&with(
            "<record>",
            &format!("<record xmlns:dc=\"{DC_NS}\" xmlns:dc=\"{DC_NS}\">"),
        ))
        .unwrap_err();
        declines(&with("<?xml", "<rss><?xml")).unwrap_err();
        for cut in [1, 10, doc.len() / 2, doc.len() - 3] {
            declines(&doc[..cut]).unwrap_err();
        }
        let deep = format!("<OAI-PMH xmlns=\"{OAI_NS}\">{}", "<a>".repeat(300));
        assert!(matches!(
            declines(&deep),
            Err(HarvestErrorKind::TooDeep { .. })
        ));
        let deep = format!(
            "<OAI-PMH>{}{}</OAI-PMH>",
            "<a>".repeat(MAX_DEPTH - 1),
            "</a>".repeat(MAX_DEPTH - 1)
        );
        check(&deep);
    }

    #[test]
    fn a_repeated_tag_is_taken_only_when_every_byte_repeats() {
        // The second and third records repeat the first record's tags with attributes, or
        // nearly: a tag that only starts the same, or ends differently, is read afresh.
        let dc = |attrs: &str| {
            format!(
                "<record><header{attrs}><identifier>oai:h:1</identifier><datestamp>2020-01-02</datestamp>\
                 </header><metadata><oai_dc:dc xmlns:oai_dc=\"{OAI_DC_NS}\" xmlns:dc=\"{DC_NS}\"{attrs}>\
                 <dc:identifier>https://h/x</dc:identifier></oai_dc:dc></metadata></record>"
            )
        };
        let page = |records: &[&str]| {
            let records: String = records.iter().map(|a| dc(a)).collect();
            envelope(&format!("<ListRecords>{records}</ListRecords>"))
        };
        let same = check(&page(&["", "", ""]));
        assert_eq!(same.records.len(), 3);
        let deleted = check(&page(&[
            " status=\"deleted\"",
            " status=\"deleted\"",
            " status=\"deletedx\"",
            " status=\"deleted\" ",
        ]));
        assert_eq!(
            deleted
                .records
                .iter()
                .map(|r| r.deleted)
                .collect::<Vec<_>>(),
            [true, true, false, true]
        );
        // The namespaces the repeated tag declares are bound again in every record.
        assert!(
            same.records
                .iter()
                .all(|r| r.dc_identifiers == ["https://h/x"])
        );
        // The same start, then a second attribute of the same name: declined as the first time.
        declines(&page(&[
            " status=\"deleted\"",
            " status=\"deleted\" status=\"x\"",
        ]))
        .unwrap_err();
    }

    #[test]
    fn names_met_before_are_not_taken_for_longer_ones() {
        // The table of names met must not read `dc:identifiers` as `dc:identifier`.
        let page = check(&one_record(
            "<dc:identifier>a</dc:identifier><dc:identifiers>b</dc:identifiers><dc:identifier.x>c</dc:identifier.x>\
             <dc:identifier\n>d</dc:identifier>",
        ));
        assert_eq!(page.records[0].dc_identifiers, ["a", "d"]);
        for (a, b) in [
            ("abcdefgh", "abcdefgh"),
            ("abcdefghijklmnopq", "abcdefghijklmnopq"),
            ("", ""),
        ] {
            assert!(same(a.as_bytes(), b.as_bytes()));
        }
        for (a, b) in [
            ("abcdefgh", "abcdefgi"),
            ("abcdefghijklmnopq", "abcdefghijklmnopr"),
            ("abcdefghijklmnopq", "bbcdefghijklmnopq"),
            ("abcdefghijk", "abcdefghijl"),
            ("abc", "abd"),
            ("abc", "abcd"),
        ] {
            assert!(!same(a.as_bytes(), b.as_bytes()), "{a} {b}");
        }
    }

    #[test]
    fn references() {
        for (text, expected) in [
            ("&amp;", Some(('&', 5))),
            ("&lt;x", Some(('<', 4))),
            ("&gt;", Some(('>', 4))),
            ("&apos;", Some(('\'', 6))),
            ("&quot;", Some(('"', 6))),
            ("&#65;", Some(('A', 5))),
            ("&#x41;", Some(('A', 6))),
            ("&#xe9;", Some(('é', 6))),
            ("&#xE9;", Some(('é', 6))),
            ("&#1114111;", Some(('\u{10FFFF}', 10))),
            ("&#x10FFFF;", Some(('\u{10FFFF}', 10))),
            ("&#x110000;", None),
            ("&#xD800;", None),
            ("&#0;", None),
            ("&#1;", None),
            ("&#;", None),
            ("&#x;", None),
            ("&#X41;", None),
            ("&#+65;", None),
            ("&#65", None),
            ("&amp", None),
            ("&ap;", None),
            ("&nbsp;", None),
            ("& ;", None),
            ("&", None),
        ] {
            assert_eq!(reference(text.as_bytes()), expected, "{text}");
        }
    }

    // ---------------------------------------------------------------------------------------
    // Differential tests against quick-xml.

    /// Choices drawn from bytes that proptest generates and shrinks: fewer and smaller bytes make
    /// simpler pages, and an exhausted string reads as all zeros (every option off).
    struct Choices<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl Choices<'_> {
        fn pick(&mut self, n: usize) -> usize {
            let b = self.bytes.get(self.at).copied().unwrap_or(0);
            self.at += 1;
            usize::from(b) % n
        }

        fn one<'s>(&mut self, options: &[&'s str]) -> &'s str {
            options[self.pick(options.len())]
        }

        /// True with about `percent` % probability; false once the choices run out.
        fn chance(&mut self, percent: usize) -> bool {
            self.pick(100) >= 100 - percent
        }
    }

    /// Builds OAI-PMH pages of many shapes from [`Choices`]. `odd` records whether it used a
    /// construct the scanner is meant to decline; without one, the scanner must take the page.
    struct PageGen<'a> {
        c: Choices<'a>,
        out: String,
        odd: bool,
        /// Prefix of OAI elements, with its colon, or empty.
        oai: String,
        /// Prefix of the root's children (differs for a Static Repository).
        container: String,
        oai_dc: &'static str,
        dc: &'static str,
        /// Where the dc prefix is declared: 0 root, 1 record, 2 the `dc` element, 3 each element.
        dc_decl: usize,
        https_dc: bool,
        https_oai_dc: bool,
    }

    const TEXT_PIECES: &[&str] = &[
        "a",
        "Z9",
        "oai:h:1",
        "https://h/x?a=1&amp;b=2",
        "doi:10.1/2",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "&amp;",
        "&lt;",
        "&gt;",
        "&quot;",
        "&apos;",
        "&#65;",
        "&#x41;",
        "&#xE9;",
        "&#233;",
        "&#10;",
        "&#x20;",
        "&#13;",
        "&#x1F600;",
        "\u{a0}",
        "&#xA0;",
        "\u{3000}",
        "\u{85}",
        "é",
        "€",
        "中文",
        "🙂",
        ">",
        "]]>",
        "'",
        "\"",
        "/",
        "=",
        ";",
        "#",
        ":",
        "?",
    ];
    const VALUE_PIECES: &[&str] = &[
        "a",
        "0",
        "10",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "&amp;",
        "&lt;",
        "&gt;",
        "&quot;",
        "&apos;",
        "&#32;",
        "&#49;",
        "&#x9;",
        "&#10;",
        "é",
        ">",
        "/",
        "=",
        "deleted",
        "+5",
        "-1",
        "99999999999999999999",
    ];
    const WS: &[&str] = &[
        "",
        "",
        "",
        "\n",
        "\n  ",
        "\r\n  ",
        "\t",
        " ",
        "<!-- note -->",
        "\n<!---->\n",
        "<!--->-->",
        "<!-- a - b --->",
    ];

    impl PageGen<'_> {
        fn push(&mut self, s: &str) {
            self.out.push_str(s);
        }

        /// Whitespace or a comment between elements, now and then something odd.
        fn gap(&mut self) {
            let ws = self.c.one(WS);
            self.push(ws);
            if self.c.chance(3) {
                self.odd = true;
                let odd = self.c.one(&[
                    "<![CDATA[c]]>",
                    "<?pi x?>",
                    "<!DOCTYPE x>",
                    "&nbsp;",
                    "&#0;",
                    "&#X41;",
                    "&#x110000;",
                    "& ",
                    "<u:x/>",
                    "<a b=c/>",
                    "<a b=\"1\" b=\"2\"/>",
                    "<a xmlns:q=\"urn:q\" xmlns:q=\"urn:r\"/>",
                    "<a b=\"1\"c=\"2\"/>",
                    "<tïtle/>",
                    "<a></a >",
                    "<a b=\"<\"/>",
                    "<a/ >",
                    "<1a/>",
                    "<a:b:c/>",
                    "</x>",
                    "<a>",
                    "<!-x->",
                    "<?xml version=\"1.0\"?>",
                ]);
                self.push(odd);
            }
        }

        fn text(&mut self, max: usize) -> String {
            let n = self.c.pick(max + 1);
            (0..n).map(|_| self.c.one(TEXT_PIECES)).collect()
        }

        /// ` name="value"` with either quote and, now and then, spaces around `=`.
        fn attr(&mut self, name: &str, value: &str) -> String {
            let (q, escaped) = if self.c.chance(50) {
                ('\'', "&apos;")
            } else {
                ('"', "&quot;")
            };
            // The other quote stays as it is: it is legal inside the value.
            let value = value.replace(q, escaped);
            let sep = self.c.one(&[" ", " ", "\n    ", "\t", "\r\n "]);
            let eq = if self.c.chance(10) { " = " } else { "=" };
            format!("{sep}{name}{eq}{q}{value}{q}")
        }

        fn value(&mut self) -> String {
            let n = self.c.pick(4);
            let mut v: String = (0..n).map(|_| self.c.one(VALUE_PIECES)).collect();
            if self.c.chance(20) {
                v.push(if self.c.chance(50) { '\'' } else { '"' });
            }
            v
        }

        /// A namespace name as a declaration spells it: now and then with an `https://` alias,
        /// padding or a character reference.
        fn ns_uri(&mut self, uri: &str, https: bool) -> String {
            let uri = if https {
                uri.replacen("http:", "https:", 1)
            } else {
                uri.to_owned()
            };
            let pad = self
                .c
                .one(&["", "", "", "", " ", "\n", "&#32;", "\u{a0}", "&#x9;"]);
            let uri = if self.c.chance(10) {
                uri.replacen('/', "&#x2F;", 1)
            } else {
                uri
            };
            format!("{pad}{uri}{pad}")
        }

        /// `xmlns` declarations of the dc prefixes, if they belong on `place`.
        fn dc_decls(&mut self, place: usize) -> String {
            let mut out = String::new();
            if place == self.dc_decl && !self.dc.is_empty() {
                let uri = self.ns_uri(DC_NS, self.https_dc);
                out += &self.attr(&format!("xmlns:{}", self.dc), &uri);
            }
            if place == self.dc_decl.min(2) && !self.oai_dc.is_empty() {
                let uri = self.ns_uri(OAI_DC_NS, self.https_oai_dc);
                out += &self.attr(&format!("xmlns:{}", self.oai_dc), &uri);
            }
            out
        }

        fn element(&mut self, name: &str, attrs: &str, content: &str) {
            if content.is_empty() && self.c.chance(30) {
                self.push(&format!("<{name}{attrs}/>"));
            } else {
                self.push(&format!("<{name}{attrs}>{content}</{name}>"));
            }
        }

        fn page(&mut self) {
            let decl = self.c.one(&[
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                "",
                "<?xml version='1.0'?>",
                "<?xml version=\"1.0\" encoding=\"utf-8\" standalone=\"yes\" ?>",
            ]);
            self.push(decl);
            self.gap();
            let style = self.c.pick(4);
            let https_oai = self.c.chance(20);
            let oai_uri = self.ns_uri(OAI_NS, https_oai);
            let prefix = self
                .c
                .one(&["oai", "o", "OAI", "p_1", "a.b", "averylongprefix"]);
            self.oai_dc = self.c.one(&["oai_dc", "d", "averylongprefix2", ""]);
            self.dc = self.c.one(&["dc", "e", "DC", "dublin-core", ""]);
            self.dc_decl = self.c.pick(4);
            self.https_dc = self.c.chance(15);
            self.https_oai_dc = self.c.chance(15);
            let (root, mut root_attrs) = match style {
                0 => ("OAI-PMH".to_owned(), self.attr("xmlns", &oai_uri)),
                1 => {
                    self.oai = format!("{prefix}:");
                    self.container = self.oai.clone();
                    (
                        format!("{prefix}:OAI-PMH"),
                        self.attr(&format!("xmlns:{prefix}"), &oai_uri),
                    )
                }
                2 => ("OAI-PMH".to_owned(), String::new()),
                _ => {
                    self.oai = format!("{prefix}:");
                    let s = self.attr("xmlns", STATIC_NS);
                    (
                        "Repository".to_owned(),
                        s + &self.attr(&format!("xmlns:{prefix}"), &oai_uri),
                    )
                }
            };
            if self.c.chance(40) {
                root_attrs += &self.attr("xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance");
                root_attrs += &self.attr(
                    "xsi:schemaLocation",
                    "http://www.openarchives.org/OAI/2.0/ x.xsd",
                );
            }
            root_attrs += &self.dc_decls(0);
            if self.dc_decl > 0 && !self.dc.is_empty() && self.c.chance(20) {
                // Shadowed deeper by the real declaration.
                root_attrs += &self.attr(&format!("xmlns:{}", self.dc), "urn:wrong");
            }
            self.push(&format!("<{root}{root_attrs}>"));
            let oai = self.oai.clone();
            let container = self.container.clone();
            if style != 3 {
                self.gap();
                let date = self.text(2);
                self.element(
                    &format!("{oai}responseDate"),
                    "",
                    &format!("2026-01-01T00:00:00Z{date}"),
                );
                self.gap();
                let verb = self.attr("verb", "ListRecords");
                let url = self.text(2);
                self.element(
                    &format!("{oai}request"),
                    &verb,
                    &format!("https://h/oai{url}"),
                );
            } else {
                self.gap();
                self.push("<Identify><x:y xmlns:x=\"urn:x\">z</x:y></Identify>");
            }
            let kind = self.c.pick(8);
            if kind >= 6 {
                for _ in 0..=self.c.pick(2) {
                    self.gap();
                    let (before, after) = (self.value(), self.value());
                    let code = self.attr("code", &format!("{before}badArgument{after}"));
                    let message = self.text(3);
                    self.element(&format!("{container}error"), &code, &message);
                }
            }
            if kind != 6 {
                self.gap();
                let attrs = if self.c.chance(30) {
                    self.attr("metadataPrefix", "oai_dc")
                } else {
                    String::new()
                };
                self.push(&format!("<{container}ListRecords{attrs}>"));
                for _ in 0..self.c.pick(4) {
                    self.gap();
                    self.record();
                }
                self.gap();
                if self.c.chance(20) {
                    self.push(&format!("<{oai}about>x</{oai}about>"));
                }
                match self.c.pick(4) {
                    0 => {}
                    n => {
                        let mut attrs = String::new();
                        for name in ["completeListSize", "cursor", "expirationDate"] {
                            if self.c.chance(50) {
                                let v = self.value();
                                attrs += &self.attr(name, &v);
                            }
                        }
                        let value = if n == 1 { String::new() } else { self.text(3) };
                        self.element(&format!("{oai}resumptionToken"), &attrs, &value);
                        self.gap();
                    }
                }
                self.push(&format!("</{container}ListRecords>"));
            }
            self.gap();
            self.push(&format!("</{root}>"));
            let tail = self.c.one(&["", "\n", "\r\n", "<!-- end -->\n"]);
            self.push(tail);
            if self.c.chance(3) {
                self.odd = true;
                let odd = self.c.one(&["x", "<OAI-PMH/>", "<?pi?>", "&amp;"]);
                self.push(odd);
            }
        }

        fn record(&mut self) {
            let oai = self.oai.clone();
            let decls = self.dc_decls(1);
            self.push(&format!("<{oai}record{decls}>"));
            self.gap();
            let status = match self.c.pick(6) {
                0 => {
                    let v = self.value();
                    self.attr("status", &v)
                }
                1 | 2 => self.attr("status", "deleted"),
                _ => String::new(),
            };
            self.push(&format!("<{oai}header{status}>"));
            for _ in 0..self.c.pick(6) {
                self.gap();
                let child = self.c.one(&[
                    "identifier",
                    "identifier",
                    "datestamp",
                    "setSpec",
                    "setSpecs",
                    "identifier.x",
                    "other",
                ]);
                let undeclare = if self.c.chance(10) {
                    self.attr("xmlns", "")
                } else {
                    String::new()
                };
                let value = match child {
                    "datestamp" => {
                        let d = self.c.one(&[
                            "2020-01-02",
                            "2020-01-02T03:04:05Z",
                            " 2020-01-02\n",
                            "garbage",
                            "2020-13-01",
                        ]);
                        d.to_owned()
                    }
                    _ => self.text(4),
                };
                self.element(&format!("{oai}{child}"), &undeclare, &value);
            }
            self.gap();
            self.push(&format!("</{oai}header>"));
            if self.c.pick(4) != 0 {
                self.gap();
                self.push(&format!("<{oai}metadata>"));
                self.gap();
                if self.c.chance(10) {
                    // Only a `dc` child of `metadata` is the oai_dc record.
                    self.push("<wrap>");
                    self.dc_record();
                    self.push("</wrap>");
                } else if self.c.chance(10) {
                    // Nothing but the gaps: empty metadata (Q-35).
                } else {
                    self.dc_record();
                }
                if self.c.chance(5) {
                    self.dc_record();
                }
                self.gap();
                if self.c.chance(10) {
                    self.push("<extra><dc:identifier xmlns:dc=\"http://purl.org/dc/elements/1.1/\">not in oai_dc</dc:identifier></extra>");
                }
                self.push(&format!("</{oai}metadata>"));
            }
            self.gap();
            self.push(&format!("</{oai}record>"));
        }

        fn dc_record(&mut self) {
            let outer = if self.oai_dc.is_empty() {
                let uri = self.ns_uri(OAI_DC_NS, self.https_oai_dc);
                ("dc".to_owned(), self.attr("xmlns", &uri))
            } else {
                (format!("{}:dc", self.oai_dc), String::new())
            };
            let decls = outer.1 + &self.dc_decls(2);
            self.push(&format!("<{}{decls}>", outer.0));
            for _ in 0..self.c.pick(7) {
                self.gap();
                let local = self.c.one(&[
                    "identifier",
                    "identifier",
                    "title",
                    "creator",
                    "identifiers",
                    "description",
                ]);
                let (name, mut attrs) = if self.dc.is_empty() {
                    let uri = self.ns_uri(DC_NS, self.https_dc);
                    (local.to_owned(), self.attr("xmlns", &uri))
                } else {
                    (format!("{}:{local}", self.dc), self.dc_decls(3))
                };
                if self.c.chance(10) {
                    attrs += &self.attr("xml:lang", "en");
                }
                let mut value = self.text(5);
                match self.c.pick(12) {
                    0 => value += "<b>nested<c/></b>tail",
                    1 => {
                        value += "<x:i xmlns:x=\"urn:x\"><y:identifier xmlns:y=\"http://purl.org/dc/elements/1.1/\">inner</y:identifier></x:i>"
                    }
                    _ => {}
                }
                if self.c.chance(5) {
                    // A DC element name in a namespace that is not DC.
                    let v = self.text(2);
                    self.push(&format!(
                        "<w:identifier xmlns:w=\"http://dublincore.org/documents/dcmi-namespace/\">{v}</w:identifier>"
                    ));
                }
                self.element(&name, &attrs, &value);
            }
            self.gap();
            self.push(&format!("</{}>", outer.0));
        }
    }

    /// A page from choices, and whether it holds something the scanner declines.
    fn generate(choices: &[u8]) -> (String, bool) {
        let mut g = PageGen {
            c: Choices {
                bytes: choices,
                at: 0,
            },
            out: String::new(),
            odd: false,
            oai: String::new(),
            container: String::new(),
            oai_dc: "oai_dc",
            dc: "dc",
            dc_decl: 0,
            https_dc: false,
            https_oai_dc: false,
        };
        g.page();
        (g.out, g.odd)
    }

    /// The property: when the scanner answers, quick-xml answers the same.
    fn agree(text: &str) -> Result<bool, TestCaseError> {
        let quirks = Quirks {
            illegal_chars_removed: 1,
            ..Quirks::default()
        };
        let mut taken = false;
        let some = Fields::of(&[DcElement::Title, DcElement::Type]);
        for fields in [Fields::default(), Fields::ALL, some] {
            if let Some(fast) = scan_list_records(text, quirks, fields) {
                prop_assert_eq!(
                    Ok(fast),
                    parse_with_quick_xml(text, quirks, text.len(), fields),
                    "{:?} {:?}",
                    fields,
                    text
                );
                taken = true;
            }
        }
        Ok(taken)
    }

    fn config(cases: u32) -> ProptestConfig {
        ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config(3000))]

        /// Generated pages: the scanner agrees with quick-xml, and takes every page without an
        /// odd construct.
        #[test]
        fn agrees_with_quick_xml(choices in proptest::collection::vec(any::<u8>(), 0..600)) {
            let (text, odd) = generate(&choices);
            let taken = agree(&text)?;
            prop_assert!(taken || odd, "declined a typical page: {:?}", text);
        }

        /// Damaged pages (cut, a byte replaced by markup, a snippet inserted, a piece removed):
        /// whenever the scanner still answers, quick-xml answers the same.
        #[test]
        fn agrees_on_damaged_pages(
            choices in proptest::collection::vec(any::<u8>(), 0..400),
            edits in proptest::collection::vec((any::<u16>(), 0..4usize, any::<u8>()), 1..4),
        ) {
            let (mut text, _) = generate(&choices);
            for (at, kind, pick) in edits {
                let mut at = usize::from(at) % (text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let pick = usize::from(pick);
                match kind {
                    0 => text.truncate(at),
                    1 => {
                        let c = ["<", "&", "\"", "'", ">", "/", "=", " ", ":", ";", "#", "x", "-", "!", "?"][pick % 15];
                        let end = text[at..].chars().next().map_or(at, |ch| at + ch.len_utf8());
                        text.replace_range(at..end, c);
                    }
                    2 => {
                        let s = [
                            "<!--x-->", "<![CDATA[y]]>", "<?pi?>", "&bogus;", "&#0;", "</a>", "<a>",
                            " xmlns=\"urn:x\"", " xmlns=\"\"", " a='1'", "<b/>", "&amp;", "&#x41;",
                            "\r\n", "<!--", "-->", "]]>", "</", "/>",
                        ][pick % 19];
                        text.insert_str(at, s);
                    }
                    _ => {
                        let mut end = (at + 1 + pick % 12).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(at..end, "");
                    }
                }
            }
            agree(&text)?;
        }
    }
}
