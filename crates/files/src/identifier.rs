//! What a `dc:identifier` value is to the files: a landing page, a content file, a persistent
//! identifier (DOI, Handle) not yet spelled as its resolver's URL, or a value not published and
//! why ([`Class`]). How a value is found to be one of them (the scope, the URL's normal form)
//! is the `oai-bridge` package's `classify`; the profiles' collectors, here, read the result.

use std::borrow::Cow;

use crate::counts::Drop;

/// What one `dc:identifier` value is, borrowed from the value where it can be: for a harvest
/// that looks at each value for several files (the sitemap and the landing-page profiles) and
/// classifies it once.
#[derive(Debug)]
pub enum Class<'a> {
    /// A landing page inside the scope, in normal form.
    LandingPage(Cow<'a, str>),
    /// A content file inside the scope (known by its extension).
    ContentFile {
        /// The file's URL, in normal form.
        url: Cow<'a, str>,
        /// Media type from the extension.
        media_type: &'static str,
    },
    /// A DOI or Handle, not yet spelled as its resolver URL.
    PersistentId(Pid<'a>),
    /// Not published, for this reason.
    Dropped(Drop),
}

impl Class<'_> {
    /// What the sitemap makes of it: the URL it publishes (a landing page or a content file),
    /// or why it publishes none (a persistent identifier counts as [`Drop::PersistentId`]).
    ///
    /// # Errors
    ///
    /// The reason the value is not published, when it is not.
    pub fn publishable(&self) -> Result<&str, Drop> {
        match self {
            Class::LandingPage(url) | Class::ContentFile { url, .. } => Ok(url),
            Class::PersistentId(_) => Err(Drop::PersistentId),
            Class::Dropped(reason) => Err(*reason),
        }
    }
}

/// A persistent identifier found in a value, not yet spelled as a URL.
#[derive(Debug)]
pub enum Pid<'a> {
    /// The DOI, from `10.` on.
    Doi(&'a str),
    /// The Handle, `prefix/suffix`.
    Handle(&'a str),
}

impl Pid<'_> {
    /// Its resolver URL: `https://doi.org/...` or `https://hdl.handle.net/...`.
    pub fn resolver_url(&self) -> String {
        let mut url = String::new();
        self.write_resolver_url(&mut url);
        url
    }

    /// [`Pid::resolver_url`] appended to `url`.
    pub(crate) fn write_resolver_url(&self, url: &mut String) {
        match self {
            Pid::Doi(doi) => encode_pid(url, "https://doi.org/", doi),
            Pid::Handle(handle) => encode_pid(url, "https://hdl.handle.net/", handle),
        }
    }
}

/// What may not stand raw in a URL path, when an identifier is written into one: `/` and
/// existing escapes are kept.
pub const NOT_IN_PATH: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'#')
    .add(b'?')
    .add(b'{')
    .add(b'}');

/// Appends `resolver` followed by `pid`, with [`NOT_IN_PATH`] percent-encoded, to `url`.
fn encode_pid(url: &mut String, resolver: &str, pid: &str) {
    url.push_str(resolver);
    // Borrowed when nothing needs escaping, as in most identifiers.
    url.push_str(&Cow::from(percent_encoding::utf8_percent_encode(
        pid,
        NOT_IN_PATH,
    )));
}
