//! Answering requests. Paths are matched exactly against the routes and the current generation's
//! file names; a request path never reaches the file system, so `..` and the like are plain 404s.
//!
//! Every file answer carries a strong ETag and the time its content last changed; `If-None-Match`
//! (which wins) and `If-Modified-Since` give 304; HEAD is GET without a body (H-03..H-07).
//! `.xml` is gzip-encoded when the client accepts it, from the stored `.xml.gz`, with
//! `Vary: Accept-Encoding`; `.xml.gz` is `application/gzip` with no `Content-Encoding` (H-02).
//!
//! The header parsing is written here because it is three small grammars (entity-tag lists,
//! `Accept-Encoding` with q-values, HTTP-dates via `httpdate`) that the `http` crate leaves to
//! the application, and the tower-http services that do parse them serve from the file system.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::generation::{FileMeta, Generation, content_hash, date_header, etag_header};
use super::keyed::{self, Pack};
use super::linkset::Asked;
use super::metrics::Route;
use super::resourcesync;
use super::{Gateway, Repo, Side, Slot};
use crate::profiles::FileName;

/// The response type of every handler.
pub(crate) type Answer = Response<Full<Bytes>>;

const XML: &str = "application/xml; charset=utf-8";
const GZIP: &str = "application/gzip";
const TEXT: &str = "text/plain; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Retry-After` of a repository that has no generation yet and no refresh due soon.
const NOT_YET_RETRY: Duration = Duration::from_secs(30);

/// A small file computed in full (robots.txt), with its validators.
#[derive(Clone, Debug)]
pub struct StaticFile {
    /// The bytes.
    pub bytes: Bytes,
    /// Strong ETag, quoted.
    pub etag: HeaderValue,
    /// When it was made.
    pub last_modified: SystemTime,
    /// The same as an HTTP-date.
    pub last_modified_header: HeaderValue,
}

impl StaticFile {
    /// The file, its ETag being a hash of its bytes.
    pub fn new(bytes: Bytes, last_modified: SystemTime) -> Self {
        Self {
            etag: etag_header(&content_hash(&bytes)),
            bytes,
            last_modified,
            last_modified_header: date_header(last_modified),
        }
    }
}

/// What a path names.
#[derive(Debug, PartialEq, Eq)]
enum Target<'a> {
    Status,
    Robots,
    Healthz,
    Readyz,
    Metrics,
    /// A file of a repository: the index or a shard (`.xml` or `.xml.gz`).
    File {
        repo: &'a str,
        name: &'a str,
        shard: bool,
    },
    /// A packed metadata document of a repository (`cdif/<key>.jsonld`).
    Document {
        repo: &'a str,
        key: u64,
    },
    /// A landing page's linkset (`linkset?url=`, Signposting Level 2).
    Linkset {
        repo: &'a str,
    },
    /// A landing page's `Link` header for a reverse proxy (`signposting`, Signposting Level 1).
    Signposting {
        repo: &'a str,
    },
    /// A ResourceSync document of a repository ([`resourcesync::Document`]).
    ResourceSync {
        repo: &'a str,
        name: &'a str,
        document: resourcesync::Document,
    },
    /// The gateway's ResourceSync Source Description (`/.well-known/resourcesync`).
    SourceDescription,
    /// `POST /-/refresh/{repo}`: start a refresh now (admin token required).
    Refresh {
        repo: &'a str,
    },
    /// `POST /-/reload`: read the configuration again (admin token required).
    Reload,
    /// `/{key}.txt`: a repository's IndexNow key file, for a gateway that is its host's sidecar.
    KeyFile {
        name: &'a str,
    },
    NotFound,
}

impl Target<'_> {
    /// Whether the target exists on `side`'s listener: crawlers' files on the public one, what
    /// operators read and do on the admin one, the probes on both.
    fn served_on(&self, side: Side) -> bool {
        match self {
            Target::Healthz | Target::Readyz => true,
            Target::Robots
            | Target::KeyFile { .. }
            | Target::File { .. }
            | Target::Document { .. }
            | Target::Linkset { .. }
            | Target::Signposting { .. }
            | Target::ResourceSync { .. }
            | Target::SourceDescription => side == Side::Public,
            Target::Status | Target::Metrics | Target::Refresh { .. } | Target::Reload => {
                side == Side::Admin
            }
            Target::NotFound => false,
        }
    }

    fn route(&self) -> Route {
        match self {
            Target::Status => Route::Status,
            Target::Robots => Route::Robots,
            Target::Healthz => Route::Healthz,
            Target::Readyz => Route::Readyz,
            Target::Metrics => Route::Metrics,
            Target::File { shard: false, .. } => Route::Index,
            Target::File { shard: true, .. } => Route::Shard,
            Target::Document { .. } => Route::Document,
            Target::Linkset { .. } => Route::Linkset,
            Target::Signposting { .. } => Route::Signposting,
            Target::ResourceSync { .. } | Target::SourceDescription => Route::ResourceSync,
            Target::Refresh { .. } | Target::Reload => Route::Admin,
            Target::KeyFile { .. } => Route::KeyFile,
            Target::NotFound => Route::Other,
        }
    }
}

/// Matches a request path, with or without the public URL's path prefix.
fn route<'a>(prefix: &str, path: &'a str) -> Target<'a> {
    let rest = match path.strip_prefix(prefix) {
        Some(rest) if !prefix.is_empty() && (rest.is_empty() || rest.starts_with('/')) => rest,
        _ => path,
    };
    match rest {
        "" | "/" => Target::Status,
        "/robots.txt" => Target::Robots,
        "/healthz" => Target::Healthz,
        "/readyz" => Target::Readyz,
        "/metrics" => Target::Metrics,
        "/-/reload" => Target::Reload,
        "/.well-known/resourcesync" => Target::SourceDescription,
        _ if rest.ends_with(".txt") && rest[1..].bytes().all(|b| b != b'/') => {
            Target::KeyFile { name: &rest[1..] }
        }
        _ if rest.starts_with("/-/refresh/") => match &rest["/-/refresh/".len()..] {
            "" => Target::NotFound,
            repo if repo.contains('/') => Target::NotFound,
            repo => Target::Refresh { repo },
        },
        _ => {
            let Some((repo, name)) = rest.strip_prefix('/').and_then(|r| r.split_once('/')) else {
                return Target::NotFound;
            };
            match name {
                "linkset" => return Target::Linkset { repo },
                "signposting" => return Target::Signposting { repo },
                _ => {}
            }
            if let Some(document) = resourcesync::Document::parse(name) {
                return Target::ResourceSync {
                    repo,
                    name,
                    document,
                };
            }
            match FileName::parse(name) {
                Some(FileName::Index(_)) => Target::File {
                    repo,
                    name,
                    shard: false,
                },
                Some(FileName::Shard(..) | FileName::List(_)) => Target::File {
                    repo,
                    name,
                    shard: true,
                },
                Some(FileName::Document(key)) => Target::Document { repo, key },
                None => Target::NotFound,
            }
        }
    }
}

/// Whether `req` may use an admin endpoint: `POST` with `Authorization: Bearer <token>`, or
/// the answer that refuses it. Without a configured token the admin endpoints do not exist
/// (404). The token is compared in constant time and never logged; a wrong or missing one is
/// 401 whatever the endpoint's argument.
fn admin_refusal(gateway: &Gateway, req: &Request<Incoming>) -> Option<Answer> {
    let Some(token) = gateway.live().admin_token.clone() else {
        return Some(plain(StatusCode::NOT_FOUND, "not found\n"));
    };
    if req.method() != Method::POST {
        let mut answer = plain(StatusCode::METHOD_NOT_ALLOWED, "only POST\n");
        answer
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return Some(answer);
    }
    let offered = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    if !offered.is_some_and(|t| token.matches(t)) {
        let mut answer = plain(
            StatusCode::UNAUTHORIZED,
            "a valid bearer token is required\n",
        );
        answer.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"oai-bridge\""),
        );
        return Some(answer);
    }
    None
}

/// `POST /-/refresh/{repo}`: wakes the repository's schedule.
fn admin_refresh(gateway: &Gateway, repo: &str, req: &Request<Incoming>) -> Answer {
    if let Some(refused) = admin_refusal(gateway, req) {
        return refused;
    }
    let Some(r) = gateway.repo(repo) else {
        return plain(StatusCode::NOT_FOUND, "no such repository\n");
    };
    if r.status().refreshing {
        return plain(StatusCode::CONFLICT, "a refresh is running\n");
    }
    tracing::info!(
        repository = repo,
        "refresh requested through the admin endpoint"
    );
    r.refresh_now.notify_one();
    plain(StatusCode::ACCEPTED, "refresh started\n")
}

/// `POST /-/reload`: reads the configuration again and applies it, as SIGHUP does; 200 with
/// what changed, or 422 with the error (naming the key) when the running configuration stays.
async fn admin_reload(gateway: &Arc<Gateway>, req: &Request<Incoming>) -> Answer {
    if let Some(refused) = admin_refusal(gateway, req) {
        return refused;
    }
    tracing::info!("reload requested through the admin endpoint");
    match gateway.reload().await {
        Ok(reloaded) => plain(StatusCode::OK, &format!("{reloaded}\n")),
        Err(e) => plain(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!(
                "{}\nthe running configuration stays\n",
                crate::error::chain(&e)
            ),
        ),
    }
}

/// Answers one request that came in on `side`'s listener, and counts it. A target of the other
/// listener is a 404, as is a path of neither.
pub(crate) async fn handle(gateway: &Arc<Gateway>, side: Side, req: Request<Incoming>) -> Answer {
    let target = match route(&gateway.prefix, req.uri().path()) {
        target if target.served_on(side) => target,
        _ => Target::NotFound,
    };
    let answer = dispatch(gateway, &target, &req).await;
    let body_bytes = if req.method() == Method::HEAD {
        0
    } else {
        hyper::body::Body::size_hint(answer.body())
            .exact()
            .unwrap_or(0)
    };
    let m = &gateway.metrics;
    m.request(target.route(), answer.status().as_u16(), body_bytes);
    // A success names a configured repository (never a label from an unknown path).
    if let Target::File { repo, .. } | Target::Document { repo, .. } | Target::Linkset { repo } =
        target
        && answer.status().is_success()
        && body_bytes > 0
    {
        let gzip = answer.headers().contains_key(header::CONTENT_ENCODING);
        m.served(repo, gzip, body_bytes);
    }
    answer
}

async fn dispatch(gateway: &Arc<Gateway>, target: &Target<'_>, req: &Request<Incoming>) -> Answer {
    if *target == Target::NotFound {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    }
    if let Target::Refresh { repo } = *target {
        return admin_refresh(gateway, repo, req);
    }
    if *target == Target::Reload {
        return admin_reload(gateway, req).await;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut answer = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are supported\n",
        );
        answer
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return answer;
    }
    let head = req.method() == Method::HEAD;
    match *target {
        Target::Status => {
            let room = gateway.state_dir_room().await;
            let view = super::status::View::parse(req.uri().query());
            let page = super::status::render_view(gateway, &view, room);
            with_type(StatusCode::OK, HTML, Bytes::from(page))
        }
        Target::Robots => {
            let file = gateway.robots();
            let validators = Validators {
                etag: &file.etag,
                last_modified: file.last_modified,
                last_modified_header: &file.last_modified_header,
            };
            respond(
                req.headers(),
                head,
                &validators,
                TEXT,
                None,
                &gateway.cache_control,
                || async { Ok(file.bytes.clone()) },
            )
            .await
        }
        Target::Healthz => plain(StatusCode::OK, "ok\n"),
        Target::Readyz => readyz(gateway, req.uri().query()),
        Target::Metrics => {
            let room = gateway.state_dir_room().await;
            let text = super::scrape::scrape(gateway, room);
            with_type(StatusCode::OK, OPENMETRICS, Bytes::from(text))
        }
        Target::File { repo, name, shard } => match gateway.repo(repo) {
            Some(repo) => serve_file(gateway, &repo, name, shard, req.headers(), head).await,
            None => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Target::Document { repo, key } => match gateway.repo(repo) {
            Some(repo) if repo.served().job.profiles.cdif => {
                serve_document(gateway, &repo, key, req.headers(), head).await
            }
            _ => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Target::Linkset { repo } => match gateway.repo(repo) {
            Some(repo) if repo.served().job.profiles.signmap => {
                serve_linkset(gateway, &repo, req, head).await
            }
            _ => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Target::Signposting { repo } => match gateway.repo(repo) {
            Some(repo) => serve_signposting(gateway, &repo, req).await,
            None => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Target::KeyFile { name } => match key_file(gateway, name) {
            Some(key) => with_type(StatusCode::OK, TEXT, Bytes::from(key)),
            None => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Target::ResourceSync {
            repo,
            name,
            document,
        } => match gateway.repo(repo) {
            Some(repo) if repo.served().config.changelist_days > 0 => {
                serve_resourcesync(gateway, &repo, name, document, req.headers(), head).await
            }
            _ => plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Target::SourceDescription => serve_source_description(gateway, req.headers(), head).await,
        Target::NotFound | Target::Refresh { .. } | Target::Reload => {
            plain(StatusCode::NOT_FOUND, "not found\n")
        }
    }
}

/// The IndexNow key whose key file is `name` (`{key}.txt`), of a repository being served: the
/// file's whole content, as the protocol asks.
pub(crate) fn key_file(gateway: &Gateway, name: &str) -> Option<String> {
    (gateway.repos().iter())
        .filter_map(|r| r.setup().config.indexnow.clone())
        .find(|c| c.key.file_name() == name)
        .map(|c| c.key.expose().to_owned())
}

/// A repository's ResourceSync document: a Change List (a file of the generation, as a shard is
/// served), or the Capability List or a Resource List, made from the generation served, with
/// validators of the generation (and of the sitemap shard a Resource List is made of).
async fn serve_resourcesync(
    gateway: &Gateway,
    repo: &Repo,
    name: &str,
    document: resourcesync::Document,
    headers: &HeaderMap,
    head: bool,
) -> Answer {
    use resourcesync::Document;
    if document == Document::Change {
        return serve_file(gateway, repo, name, false, headers, head).await;
    }
    let Some(generation) = repo.current() else {
        return not_yet(repo);
    };
    let served = repo.served();
    let public_url = &served.job.public_url;
    let shards = resourcesync::sitemap_shards(&generation);
    // The sitemap shard a Resource List is made of: the one, or the one named.
    let shard = match document {
        Document::ResourceList if shards.len() == 1 => Some(&shards[0]),
        Document::ResourceListShard(n) if shards.len() > 1 => shards.iter().find(|s| s.0 == n),
        Document::ResourceListShard(_) => return plain(StatusCode::NOT_FOUND, "not found\n"),
        _ => None,
    };
    let last_modified = generation.created;
    let last_modified_header = super::generation::date_header(last_modified);
    if let Some((_, shard)) = shard {
        let Some((index, meta)) = generation.file(shard) else {
            return plain(StatusCode::NOT_FOUND, "not found\n");
        };
        let hash = meta.etag.to_str().unwrap_or_default();
        let etag = resourcesync::etag(&generation, name, hash);
        let validators = Validators {
            etag: &etag,
            last_modified,
            last_modified_header: &last_modified_header,
        };
        let generation = &generation;
        return respond(
            headers,
            head,
            &validators,
            XML,
            None,
            &gateway.cache_control,
            || async move {
                let bytes = load(gateway, generation, index, meta).await?;
                Ok(resourcesync::resourcelist(generation, public_url, &bytes))
            },
        )
        .await;
    }
    let bytes = match document {
        Document::CapabilityList => {
            resourcesync::capability_list(&generation, public_url, &gateway.public_url)
        }
        _ => resourcesync::resourcelist_index(&generation, public_url),
    };
    let etag = resourcesync::etag(&generation, name, &content_hash(&bytes));
    let validated = (&etag, last_modified);
    respond_with(gateway, headers, head, validated, (XML, None), bytes).await
}

/// The gateway's Source Description: the Capability List of every repository that publishes
/// ResourceSync and has a generation, dated by the newest of them.
async fn serve_source_description(gateway: &Gateway, headers: &HeaderMap, head: bool) -> Answer {
    let repos = gateway.repos();
    let mut listed = Vec::new();
    let mut newest = gateway.started;
    for repo in repos.iter() {
        let served = repo.served();
        if served.config.changelist_days == 0 {
            continue;
        }
        if let Some(generation) = repo.current() {
            newest = newest.max(generation.created);
            listed.push(served.job.public_url.clone());
        }
    }
    let file = StaticFile::new(resourcesync::source_description(listed.iter()), newest);
    let validated = (&file.etag, file.last_modified);
    respond_with(
        gateway,
        headers,
        head,
        validated,
        (XML, None),
        file.bytes.clone(),
    )
    .await
}

/// The landing URL of a `?url=` query: the whole rest of the query, percent-decoded (`+` is
/// not a space: landing URLs hold `+` more often than spaces), so that a proxy that leaves a
/// landing URL's own `&` and `?` unencoded still names it.
fn url_param(query: Option<&str>) -> Option<String> {
    let value = query?.strip_prefix("url=")?;
    let decoded = percent_encoding::percent_decode_str(value)
        .decode_utf8()
        .ok()?;
    (!decoded.is_empty()).then(|| decoded.into_owned())
}

/// The linkset whose anchor is exactly `landing` in `generation`, with its entry; `Ok(None)`
/// for a page the Signmap does not list.
async fn find_linkset(
    gateway: &Gateway,
    generation: &Arc<Generation>,
    landing: &str,
) -> Result<Option<(super::linkset::Linkset, keyed::Entry)>, Arc<std::io::Error>> {
    let key = super::linkset::key(landing);
    for (position, entry) in lookup(gateway, generation, Pack::Linksets, key).await? {
        let bytes = packed(gateway, generation, Pack::Linksets, position, entry).await?;
        let Some(linkset) = super::linkset::decode_record(&bytes) else {
            return Err(Arc::new(std::io::Error::other(
                "a record of the linkset pack does not parse",
            )));
        };
        // A hash collision: another page's links, never served for this one.
        if linkset.anchor == landing {
            return Ok(Some((linkset, entry)));
        }
    }
    Ok(None)
}

/// Counts a Signposting request on the status page and in the metrics.
fn signposting_asked(gateway: &Gateway, repo: &Repo, asked: Asked, landing: &str, found: bool) {
    repo.signposting.count(asked, landing, found);
    gateway
        .metrics
        .signposting(&repo.name, asked.as_str(), found);
}

/// The entries with `key` in the index of `generation`'s `pack`, with their positions: the
/// index is on disk ([`keyed`]), its blocks cached like files, each read once on a blocking
/// thread for all concurrent misses.
async fn lookup(
    gateway: &Gateway,
    generation: &Arc<Generation>,
    pack: Pack,
    key: u64,
) -> Result<Vec<(u64, keyed::Entry)>, Arc<std::io::Error>> {
    let mut found = Vec::new();
    for block in generation.index(pack).blocks(key) {
        let g = Arc::clone(generation);
        let bytes = cached(gateway, generation, Slot::Block(pack, block), async move {
            tokio::task::spawn_blocking(move || g.index(pack).read_block(block).map(Bytes::from))
                .await
                .map_err(std::io::Error::other)?
        })
        .await?;
        found.extend(keyed::Index::in_block(block, &bytes, key));
    }
    Ok(found)
}

/// The bytes of the item of `pack` at `position` of its index, from the cache or, once for all
/// concurrent misses, the disk.
async fn packed(
    gateway: &Gateway,
    generation: &Arc<Generation>,
    pack: Pack,
    position: u64,
    entry: keyed::Entry,
) -> Result<Bytes, Arc<std::io::Error>> {
    let path = generation.pack_path(pack);
    cached(
        gateway,
        generation,
        Slot::Item(pack, position),
        async move {
            tokio::task::spawn_blocking(move || {
                use std::os::unix::fs::FileExt;
                let mut bytes = vec![0; entry.len as usize];
                std::fs::File::open(&path)?.read_exact_at(&mut bytes, entry.offset)?;
                Ok::<_, std::io::Error>(Bytes::from(bytes))
            })
            .await
            .map_err(std::io::Error::other)?
        },
    )
    .await
}

/// Whether `Accept` prefers `application/linkset` to `application/linkset+json` (RFC 9264's
/// two formats); without a preference, JSON.
fn prefers_linkset_text(headers: &HeaderMap) -> bool {
    let (mut json, mut text, mut wildcard) = (None, None, None::<f32>);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let range = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
                })
                .next()
                .map_or(1.0, |v| v.parse::<f32>().unwrap_or(0.0));
            match range.as_str() {
                super::linkset::JSON => json = Some(q),
                super::linkset::TEXT => text = Some(q),
                "*/*" | "application/*" => wildcard = Some(wildcard.map_or(q, |w| w.max(q))),
                _ => {}
            }
        }
    }
    let text = text.or(wildcard).unwrap_or(0.0);
    let json = json.or(wildcard).unwrap_or(0.0);
    text > json
}

/// Signposting Level 2: the linkset of the landing page named by `?url=`, as
/// `application/linkset+json` or `application/linkset` by `Accept`, with a strong ETag of the
/// bytes sent and the Last-Modified of the Signmap shard it came from; 404 for a page the
/// Signmap does not list.
async fn serve_linkset(
    gateway: &Gateway,
    repo: &Repo,
    req: &Request<Incoming>,
    head: bool,
) -> Answer {
    let Some(landing) = url_param(req.uri().query()) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "give the landing page's URL, percent-encoded, as ?url=\n",
        );
    };
    let Some(generation) = repo.current() else {
        return not_yet(repo);
    };
    let found = find_linkset(gateway, &generation, &landing).await;
    if let Ok(found) = &found {
        signposting_asked(gateway, repo, Asked::Linkset, &landing, found.is_some());
    }
    let (linkset, entry) = match found {
        Ok(Some(found)) => found,
        Ok(None) => return plain(StatusCode::NOT_FOUND, "no linkset for this page\n"),
        Err(e) => {
            tracing::error!("cannot read a linkset of the current generation: {e}");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the linkset cannot be read; see the server log\n",
            );
        }
    };
    let (content_type, body) = if prefers_linkset_text(req.headers()) {
        (super::linkset::TEXT, linkset.to_text())
    } else {
        (super::linkset::JSON, linkset.to_json())
    };
    let body = Bytes::from(body);
    let last_modified = SystemTime::UNIX_EPOCH + Duration::from_secs(entry.time.max(0) as u64);
    let etag = etag_header(&content_hash(&body));
    let validated = (&etag, last_modified);
    let kind = (content_type, Some("Accept"));
    respond_with(gateway, req.headers(), head, validated, kind, body).await
}

/// The header a reverse proxy names the landing page in (else `?url=`).
const SIGNPOSTING_URL_HEADER: &str = "x-signposting-url";

/// Signposting Level 1: 204 with the `Link` header the landing page should carry (named in
/// `X-Signposting-Url` or `?url=`), or 204 without one for a page the gateway does not know (a
/// proxy adds nothing then). Never an error status for a page: the proxy must serve the page
/// whatever the answer.
async fn serve_signposting(gateway: &Gateway, repo: &Repo, req: &Request<Incoming>) -> Answer {
    let nothing = || {
        Response::builder()
            .status(StatusCode::NO_CONTENT)
            .header(header::CACHE_CONTROL, gateway.cache_control.clone())
            .body(Full::new(Bytes::new()))
            .expect("valid response")
    };
    let served = repo.served();
    if !served.job.profiles.signmap {
        return nothing();
    }
    let landing = req
        .headers()
        .get(SIGNPOSTING_URL_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| url_param(req.uri().query()));
    let (Some(landing), Some(generation)) = (landing, repo.current()) else {
        return nothing();
    };
    let found = find_linkset(gateway, &generation, &landing).await;
    if let Ok(found) = &found {
        signposting_asked(gateway, repo, Asked::Header, &landing, found.is_some());
    }
    let linkset = match found {
        Ok(Some((linkset, _))) => linkset,
        Ok(None) => return nothing(),
        Err(e) => {
            tracing::error!("cannot read a linkset of the current generation: {e}");
            return nothing();
        }
    };
    let relations = &served.config.signposting_header;
    let url = super::linkset::linkset_url(served.job.public_url.as_str(), &landing);
    let mut answer = nothing();
    match HeaderValue::from_str(&linkset.header(relations, &url)) {
        Ok(link) if !link.is_empty() => {
            answer.headers_mut().insert(header::LINK, link);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(landing, "a Link header that cannot be sent: {e}"),
    }
    answer
}

/// `/readyz`: 200 unless a repository configured at start has neither a generation nor an
/// ended first refresh; 503 naming those. A stale generation counts as serving, and a first
/// refresh that failed releases its repository too: a broken upstream shows on the status page
/// and in the metrics, not as an unready process ([`Gateway::waiting`]). `?repository=NAME`
/// asks about that one, strictly: 503 until it has a generation (404 when unknown).
fn readyz(gateway: &Gateway, query: Option<&str>) -> Answer {
    let asked = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("repository="))
        .map(|name| percent_encoding::percent_decode_str(name).decode_utf8_lossy());
    let message = match asked {
        Some(name) => match gateway.repo(&name) {
            Some(repo) if repo.serving() => None,
            Some(repo) => Some(if repo.status().last_error.is_some() {
                format!(
                    "not ready: no generation yet for {}; the last refresh failed\n",
                    repo.name
                )
            } else {
                format!("not ready: no generation yet for {}\n", repo.name)
            }),
            None => return plain(StatusCode::NOT_FOUND, "no such repository\n"),
        },
        None => {
            let waiting = gateway.waiting();
            (!waiting.is_empty())
                .then(|| format!("not ready: no generation yet for {}\n", waiting.join(", ")))
        }
    };
    match message {
        None => plain(StatusCode::OK, "ready\n"),
        Some(message) => plain(StatusCode::SERVICE_UNAVAILABLE, &message),
    }
}

/// A CDIF document: `application/ld+json; profile="CDIF1.0"`, with a Link back to the landing
/// page it describes; validators from its bytes and its record's datestamp.
async fn serve_document(
    gateway: &Gateway,
    repo: &Repo,
    key: u64,
    headers: &HeaderMap,
    head: bool,
) -> Answer {
    let Some(generation) = repo.current() else {
        return not_yet(repo);
    };
    let loaded = match lookup(gateway, &generation, Pack::Documents, key).await {
        Ok(found) => match found.first() {
            Some(&(position, entry)) => {
                packed(gateway, &generation, Pack::Documents, position, entry)
                    .await
                    .map(|bytes| (bytes, entry))
            }
            None => return plain(StatusCode::NOT_FOUND, "not found\n"),
        },
        Err(e) => Err(e),
    };
    let (bytes, entry) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::error!("cannot read a document of the current generation: {e}");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the document cannot be read; see the server log\n",
            );
        }
    };
    let last_modified = if entry.time == i64::MIN {
        generation.created
    } else {
        SystemTime::UNIX_EPOCH + Duration::from_secs(entry.time.max(0) as u64)
    };
    let etag = etag_header(&content_hash(&bytes));
    let landing = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("@id")?.as_str().map(str::to_owned));
    let kind = (crate::profiles::cdif::CONTENT_TYPE, None);
    let validated = (&etag, last_modified);
    let mut answer = respond_with(gateway, headers, head, validated, kind, bytes).await;
    let link =
        landing.and_then(|l| HeaderValue::from_str(&format!("<{l}>; rel=\"describes\"")).ok());
    if let Some(link) = link {
        answer.headers_mut().insert(header::LINK, link);
    }
    answer
}

async fn serve_file(
    gateway: &Gateway,
    repo: &Repo,
    name: &str,
    shard: bool,
    headers: &HeaderMap,
    head: bool,
) -> Answer {
    let gz_route = name.ends_with(".gz");
    if gz_route && !(shard && repo.served().config.gzip) {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    }
    let Some(generation) = repo.current() else {
        return not_yet(repo);
    };
    // `.xml`: negotiated; `.xml.gz`: the gzipped bytes as a file of their own; a CDIF list
    // as it is (not gzipped: a list holds every record's document, gigabytes for a large
    // repository, which a gzip per refresh would take many CPU-seconds to compress).
    let list = name.ends_with(".jsonld");
    let (stored, content_type, encoding) = if gz_route {
        (name.to_owned(), GZIP, None)
    } else if list {
        (
            name.to_owned(),
            crate::profiles::cdif::LIST_CONTENT_TYPE,
            None,
        )
    } else if accepts_gzip(headers) {
        (format!("{name}.gz"), XML, Some("gzip"))
    } else {
        (name.to_owned(), XML, None)
    };
    let vary = (!gz_route && !list).then_some("Accept-Encoding");
    let Some((index, meta)) = generation.file(&stored) else {
        // As the bucket holds it: a shard negotiated in gzip is answered plain.
        let answer = retired(gateway, repo, name, headers, head, (content_type, vary)).await;
        return answer.unwrap_or_else(|| plain(StatusCode::NOT_FOUND, "not found\n"));
    };
    let validators = Validators {
        etag: &meta.etag,
        last_modified: meta.last_modified,
        last_modified_header: &meta.last_modified_header,
    };
    let mut answer = respond(
        headers,
        head,
        &validators,
        content_type,
        vary,
        &gateway.cache_control,
        || load(gateway, &generation, index, meta),
    )
    .await;
    if let Some(encoding) = encoding
        && answer.status() != StatusCode::NOT_MODIFIED
        && answer.status().is_success()
    {
        answer
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    answer
}

/// How long a request for a retired shard waits for the bucket ([`retired`]).
const RETIRED_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A shard a generation before listed, asked by a crawler that read an index before the last
/// swap: a repository published to a bucket names its shards after their content, and this
/// generation no longer has the old names. The bucket keeps them for `publish_grace_secs`
/// ([`crate::bucket`]), so they are answered from there, as the bucket would answer them;
/// `None` (a 404) for a name that is no content name, or that the bucket does not have or
/// cannot give now.
async fn retired(
    gateway: &Gateway,
    repo: &Repo,
    name: &str,
    headers: &HeaderMap,
    head: bool,
    kind: (&'static str, Option<&'static str>),
) -> Option<Answer> {
    let setup = repo.setup();
    if setup.publish.is_none() || !is_content_name(name) {
        return None;
    }
    let read = async {
        let bucket = setup.bucket().await.expect("a publish URL")?;
        bucket.read_dated(name).await
    };
    // A crawler waits no longer than this for a bucket that does not answer (object storage's
    // client retries for minutes).
    let (bytes, modified) = match tokio::time::timeout(RETIRED_READ_TIMEOUT, read).await {
        Ok(Ok(found)) => found?,
        Ok(Err(e)) => {
            tracing::debug!(name, "a retired shard cannot be read from the bucket: {e}");
            return None;
        }
        Err(_) => {
            tracing::debug!(name, "a retired shard: the bucket did not answer in time");
            return None;
        }
    };
    let etag = etag_header(&content_hash(&bytes));
    Some(respond_with(gateway, headers, head, (&etag, modified), kind, bytes).await)
}

/// Whether `name` is the content name of a shard or a CDIF list:
/// `{stem}-{16 hex digits}.{extension}`, the shape [`oai_bridge_files::profiles::content_name`]
/// gives.
fn is_content_name(name: &str) -> bool {
    let Some((stem, ext)) = name.split_once('.') else {
        return false;
    };
    let Some((shard, hash)) = stem.rsplit_once('-') else {
        return false;
    };
    hash.len() == 16
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && matches!(
            FileName::parse(&format!("{shard}.{ext}")),
            Some(FileName::Shard(..) | FileName::List(_))
        )
}

/// The bytes of a stored file, from the cache or, once for all concurrent requests, the disk.
async fn load(
    gateway: &Gateway,
    generation: &Arc<Generation>,
    index: u32,
    meta: &FileMeta,
) -> Result<Bytes, Arc<std::io::Error>> {
    let path = generation.path(meta);
    let bodies = gateway.bodies.clone();
    cached(gateway, generation, Slot::File(index), async move {
        // Read through `bodies`, so that a big file is sent from the page cache (sendfile.rs).
        tokio::task::spawn_blocking(move || bodies.read(&path))
            .await
            .map_err(std::io::Error::other)?
    })
    .await
}

/// Entry `slot` of `generation` from the cache, or from `fill`, run once for all concurrent
/// misses. A request that began before a swap may fill an entry of the replaced generation
/// after [`Gateway::forget`] dropped its entries; such an entry is dropped again at once, so
/// replaced generations never accumulate in the cache under load.
async fn cached(
    gateway: &Gateway,
    generation: &Generation,
    slot: Slot,
    fill: impl Future<Output = Result<Bytes, std::io::Error>>,
) -> Result<Bytes, Arc<std::io::Error>> {
    let key = (generation.serial, slot);
    let bytes = gateway
        .cache
        .try_get_with(key, async move {
            gateway.metrics.cache_fills.inc();
            fill.await
        })
        .await;
    if generation.is_retired() {
        gateway.cache.invalidate(&key).await;
    }
    bytes
}

struct Validators<'a> {
    etag: &'a HeaderValue,
    last_modified: SystemTime,
    last_modified_header: &'a HeaderValue,
}

/// The common part of every file answer: validators, conditional requests, HEAD.
/// [`respond`] with bytes at hand, validated by `etag` and `last_modified`.
async fn respond_with(
    gateway: &Gateway,
    headers: &HeaderMap,
    head: bool,
    (etag, last_modified): (&HeaderValue, SystemTime),
    (content_type, vary): (&'static str, Option<&'static str>),
    body: Bytes,
) -> Answer {
    let validators = Validators {
        etag,
        last_modified,
        last_modified_header: &date_header(last_modified),
    };
    let cache_control = &gateway.cache_control;
    respond(
        headers,
        head,
        &validators,
        content_type,
        vary,
        cache_control,
        || async move { Ok(body) },
    )
    .await
}

async fn respond<F, Fut>(
    headers: &HeaderMap,
    head: bool,
    v: &Validators<'_>,
    content_type: &'static str,
    vary: Option<&'static str>,
    cache_control: &HeaderValue,
    body: F,
) -> Answer
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Bytes, Arc<std::io::Error>>>,
{
    let mut builder = Response::builder()
        .header(header::ETAG, v.etag.clone())
        .header(header::LAST_MODIFIED, v.last_modified_header.clone())
        .header(header::CACHE_CONTROL, cache_control.clone());
    if let Some(vary) = vary {
        builder = builder.header(header::VARY, HeaderValue::from_static(vary));
    }
    if precondition_failed(headers, v) {
        return builder
            .status(StatusCode::PRECONDITION_FAILED)
            .body(Full::new(Bytes::new()))
            .expect("valid response");
    }
    if not_modified(headers, v) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Full::new(Bytes::new()))
            .expect("valid response");
    }
    let bytes = match body().await {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!("cannot read a file of the current generation: {e}");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the file cannot be read; see the server log\n",
            );
        }
    };
    let builder = builder.header(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if head {
        builder
            .header(header::CONTENT_LENGTH, bytes.len())
            .body(Full::new(Bytes::new()))
    } else {
        builder.body(Full::new(bytes))
    }
    .expect("valid response")
}

/// RFC 9110 §13.2.2, steps 1 and 2, evaluated before [`not_modified`]: `If-Match` that names
/// no current ETag (strong comparison; `*` matches, the file exists), or else an
/// `If-Unmodified-Since` that parses and is before `Last-Modified`, fails the request with 412.
fn precondition_failed(headers: &HeaderMap, v: &Validators<'_>) -> bool {
    if let Some(matched) = names_etag(headers, header::IF_MATCH, v.etag, false) {
        return !matched;
    }
    date_in(headers, header::IF_UNMODIFIED_SINCE).is_some_and(|since| v.last_modified > since)
}

/// H-05: `If-None-Match` decides when present (weak comparison, `*` matches); otherwise
/// `If-Modified-Since`, when it parses, at or after `Last-Modified`.
fn not_modified(headers: &HeaderMap, v: &Validators<'_>) -> bool {
    if let Some(matched) = names_etag(headers, header::IF_NONE_MATCH, v.etag, true) {
        return matched;
    }
    date_in(headers, header::IF_MODIFIED_SINCE).is_some_and(|since| v.last_modified <= since)
}

/// Whether the ETag lists of header `name` name `etag` (or `*`), compared weakly (a `W/` prefix
/// ignored) or strongly; `None` when the request has no such header.
fn names_etag(
    headers: &HeaderMap,
    name: header::HeaderName,
    etag: &HeaderValue,
    weak: bool,
) -> Option<bool> {
    let mut values = headers.get_all(name).iter().peekable();
    values.peek()?;
    let etag = etag.to_str().unwrap_or("");
    let named = values
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(','))
        .map(str::trim)
        .any(|t| t == "*" || (if weak { t.trim_start_matches("W/") } else { t }) == etag);
    Some(named)
}

/// The HTTP-date of header `name`, when the request has one that parses (else it is ignored).
fn date_in(headers: &HeaderMap, name: header::HeaderName) -> Option<SystemTime> {
    headers
        .get(name)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| httpdate::parse_http_date(h).ok())
}

/// `Accept-Encoding` allows gzip and does not prefer the uncompressed bytes: `gzip` (or
/// `x-gzip`) with a non-zero q, or `*` with a non-zero q when gzip is not listed; and a q at
/// least that of `identity` when `identity` is listed (RFC 9110 §12.5.3).
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    let (mut gzip, mut star, mut identity) = (None, None, None);
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
                })
                .next()
                .map_or(1.0, |v| v.parse::<f32>().unwrap_or(0.0));
            let slot =
                if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                    &mut gzip
                } else if coding.eq_ignore_ascii_case("identity") {
                    &mut identity
                } else if coding == "*" {
                    &mut star
                } else {
                    continue;
                };
            slot.get_or_insert(q);
        }
    }
    let q = gzip.or(star).unwrap_or(0.0);
    q > 0.0 && identity.is_none_or(|identity| q >= identity)
}

/// 503 for a repository without a generation yet (H-08), with a `Retry-After` of the time until
/// its next refresh is due, or a short wait while one runs.
fn not_yet(repo: &Repo) -> Answer {
    let status = repo.status();
    let wait = match (status.refreshing, status.next_refresh) {
        (false, Some(next)) => next
            .duration_since(SystemTime::now())
            .unwrap_or_default()
            .max(Duration::from_secs(1)),
        _ => NOT_YET_RETRY,
    };
    // Never the refresh's error: it names the upstream URL, which may carry an API key in its
    // query, and crawlers have no use for it. The status page and the log show it.
    let why = if status.refreshing {
        "the first refresh is running"
    } else if status.waiting_for_slot {
        "the first refresh is waiting for a refresh slot"
    } else if status.last_error.is_some() {
        "the last refresh failed; the next one is scheduled"
    } else {
        "the first refresh is scheduled"
    };
    let message = format!("{}: no sitemap yet; {why}\n", repo.name);
    let mut answer = plain(StatusCode::SERVICE_UNAVAILABLE, &message);
    answer.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(wait.as_secs().max(1)),
    );
    answer
}

fn plain(status: StatusCode, text: &str) -> Answer {
    let mut answer = with_type(status, TEXT, Bytes::from(text.to_owned()));
    answer
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

fn with_type(status: StatusCode, content_type: &'static str, body: Bytes) -> Answer {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(body))
        .expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_names_are_told_from_other_names() {
        let hash = "0123456789abcdef";
        for name in [
            format!("sitemap-1-{hash}.xml"),
            format!("sitemap-12-{hash}.xml.gz"),
            format!("signmap-3-{hash}.xml"),
            format!("cdif-list-2-{hash}.jsonld"),
        ] {
            assert!(is_content_name(&name), "{name}");
        }
        for name in [
            "sitemap-1.xml".to_owned(),
            "sitemap.xml".to_owned(),
            format!("sitemap-{hash}.xml"),
            format!("robots-{hash}.txt"),
            format!("sitemap-1-{}.xml", &hash[1..]),
            "sitemap-1-0123456789abcdeg.xml".to_owned(),
            format!("../sitemap-1-{hash}.xml"),
        ] {
            assert!(!is_content_name(&name), "{name}");
        }
    }

    #[test]
    fn signposting_routes_and_their_query() {
        assert_eq!(route("", "/r/linkset"), Target::Linkset { repo: "r" });
        assert_eq!(
            route("/maps", "/maps/r/signposting"),
            Target::Signposting { repo: "r" }
        );
        assert_eq!(route("", "/r/linkset/x"), Target::NotFound);
        assert_eq!(
            url_param(Some("url=https%3A%2F%2Fa.example%2Fp%3Fx%3D1%2B2")).as_deref(),
            Some("https://a.example/p?x=1+2")
        );
        // A proxy that leaves the landing URL's own query as it is.
        assert_eq!(
            url_param(Some("url=https://a.example/p?x=1&y=2")).as_deref(),
            Some("https://a.example/p?x=1&y=2")
        );
        assert_eq!(url_param(Some("x=1")), None);
        assert_eq!(url_param(Some("url=")), None);
        assert_eq!(url_param(None), None);
    }

    #[test]
    fn linkset_formats_by_accept() {
        let prefers = |accept: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            prefers_linkset_text(&h)
        };
        assert!(!prefers_linkset_text(&HeaderMap::new()));
        assert!(prefers("application/linkset"));
        assert!(!prefers("application/linkset+json"));
        assert!(!prefers("application/linkset, application/linkset+json"));
        assert!(prefers(
            "application/linkset+json;q=0.5, application/linkset"
        ));
        assert!(prefers("application/linkset, */*;q=0.1"));
        assert!(!prefers("*/*"));
    }

    #[test]
    fn paths_match_exactly_with_or_without_the_prefix() {
        let file = |repo, name, shard| Target::File { repo, name, shard };
        assert_eq!(route("", "/"), Target::Status);
        assert_eq!(route("", "/robots.txt"), Target::Robots);
        assert_eq!(route("", "/r/sitemap.xml"), file("r", "sitemap.xml", false));
        assert_eq!(
            route("", "/r/sitemap-12.xml"),
            file("r", "sitemap-12.xml", true)
        );
        assert_eq!(
            route("", "/r/sitemap-3.xml.gz"),
            file("r", "sitemap-3.xml.gz", true)
        );
        assert_eq!(
            route("/maps", "/maps/r/sitemap.xml"),
            file("r", "sitemap.xml", false)
        );
        assert_eq!(
            route("/maps", "/r/sitemap.xml"),
            file("r", "sitemap.xml", false)
        );
        assert_eq!(route("/maps", "/maps"), Target::Status);
        assert_eq!(route("", "/r/signmap.xml"), file("r", "signmap.xml", false));
        assert_eq!(route("", "/r/ocx-1.xml"), file("r", "ocx-1.xml", true));
        assert_eq!(
            route("", "/r/sitemapindex-diwoo-infocat014.xml"),
            file("r", "sitemapindex-diwoo-infocat014.xml", false)
        );
        assert_eq!(
            route("", "/r/diwoo-infocat014-3.xml"),
            file("r", "diwoo-infocat014-3.xml", true)
        );
        assert_eq!(
            route("", "/r/cdif/00ff00ff00ff00ff.jsonld"),
            Target::Document {
                repo: "r",
                key: 0x00ff_00ff_00ff_00ff
            }
        );
        assert_eq!(
            route("", "/r/cdif-sitemap-1.xml"),
            file("r", "cdif-sitemap-1.xml", true)
        );
        for (name, shard) in [
            ("cdif-list-sitemap.xml", false),
            ("cdif-list-sitemap-2.xml", true),
            ("cdif-list-12.jsonld", true),
        ] {
            assert_eq!(route("", &format!("/r/{name}")), file("r", name, shard));
        }
        assert_eq!(route("/maps", "/maps/robots.txt"), Target::Robots);
        assert_eq!(route("/maps", "/mapsx/robots.txt"), Target::NotFound);
        for bad in [
            "/r/../r/sitemap.xml",
            "/r/sitemap-0.xml",
            "/r/sitemap-01.xml",
            "/r/sitemap-.xml",
            "/r/sitemap-1.xml.gz.gz",
            "/r/sitemap.xml.gz",
            "/r/manifest.json",
            "/r/sub/sitemap.xml",
            "/r/%2e%2e/sitemap.xml",
            "/robots.txt/",
            "//sitemap.xml",
            "/r/sitemap-1.XML",
            "/r/signmap-0.xml",
            "/r/sigmap-1.xml",
            "/r/sitemapindex-diwoo-infocat14.xml",
            "/r/diwoo-infocat014.xml",
            "/r/diwoo-infocat0145-1.xml",
            "/r/cdif/00FF00FF00FF00FF.jsonld",
            "/r/cdif/00ff.jsonld",
            "/r/cdif/00ff00ff00ff00ff.json",
            "/r/cdif-list-0.jsonld",
            "/r/cdif-list-1.jsonld.gz",
            "/r/cdif-list-.jsonld",
            "/r/cdif-list.jsonld",
            "/r/cdif-list-1.json",
        ] {
            // An empty repository name matches no repository: also a 404.
            let target = route("", bad);
            assert!(
                matches!(target, Target::NotFound | Target::File { repo: "", .. }),
                "{bad} -> {target:?}"
            );
        }
    }

    /// Issue 22: crawlers' files on the public listener, the status page, the metrics and the
    /// admin endpoints on the admin one, the probes on both.
    #[test]
    fn each_listener_has_its_routes() {
        for (path, public, admin) in [
            ("/robots.txt", true, false),
            ("/r/sitemap.xml", true, false),
            ("/r/sitemap-1.xml.gz", true, false),
            ("/r/cdif/00ff00ff00ff00ff.jsonld", true, false),
            ("/healthz", true, true),
            ("/readyz", true, true),
            ("/", false, true),
            ("/metrics", false, true),
            ("/-/refresh/r", false, true),
            ("/nothing", false, false),
        ] {
            let target = route("", path);
            assert_eq!(target.served_on(Side::Public), public, "{path}");
            assert_eq!(target.served_on(Side::Admin), admin, "{path}");
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn accept_encoding_respects_q_values() {
        let yes = |v: &str| accepts_gzip(&headers(&[("accept-encoding", v)]));
        assert!(yes("gzip"));
        assert!(yes("br, GZIP;q=0.5"));
        assert!(yes("*"));
        assert!(yes("x-gzip"));
        assert!(!yes("gzip;q=0"));
        assert!(!yes("gzip;q=0.0, *"));
        assert!(!yes("identity"));
        assert!(!yes("br, deflate"));
        assert!(!yes("*;q=0"));
        assert!(!accepts_gzip(&HeaderMap::new()));
        // Preferring the uncompressed bytes is heard; a tie goes to gzip.
        assert!(!yes("gzip;q=0.5, identity;q=1"));
        assert!(!yes("identity, *;q=0.5"));
        assert!(yes("gzip, identity"));
        assert!(yes("identity;q=0.5, gzip"));
        assert!(yes("gzip;q=0.5"));
    }

    /// H-05: If-None-Match wins over If-Modified-Since; a bad date is ignored. If-Match and
    /// If-Unmodified-Since fail a request with 412.
    #[test]
    fn conditional_requests() {
        let lm = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let etag = HeaderValue::from_static("\"abc\"");
        let lm_header = date_header(lm);
        let v = Validators {
            etag: &etag,
            last_modified: lm,
            last_modified_header: &lm_header,
        };
        let at = |t: SystemTime| httpdate::fmt_http_date(t);
        let old = at(lm - Duration::from_secs(10));
        let new = at(lm);
        let nm = |pairs: &[(&'static str, &str)]| not_modified(&headers(pairs), &v);
        assert!(nm(&[("if-none-match", "\"abc\"")]));
        assert!(nm(&[("if-none-match", "\"x\", W/\"abc\"")]));
        assert!(nm(&[("if-none-match", "*")]));
        assert!(nm(&[
            ("if-none-match", "\"abc\""),
            ("if-modified-since", &old)
        ]));
        assert!(!nm(&[
            ("if-none-match", "\"zzz\""),
            ("if-modified-since", &new)
        ]));
        assert!(nm(&[("if-modified-since", &new)]));
        assert!(!nm(&[("if-modified-since", &old)]));
        assert!(!nm(&[("if-modified-since", "yesterday")]));
        assert!(!nm(&[]));

        // RFC 9110 §13.1.1, §13.1.4: If-Match (strong), else If-Unmodified-Since.
        let failed = |pairs: &[(&'static str, &str)]| precondition_failed(&headers(pairs), &v);
        assert!(!failed(&[]));
        assert!(!failed(&[("if-match", "\"abc\"")]));
        assert!(!failed(&[("if-match", "\"x\", \"abc\"")]));
        assert!(!failed(&[("if-match", "*")]));
        assert!(failed(&[("if-match", "\"x\"")]));
        assert!(
            failed(&[("if-match", "W/\"abc\"")]),
            "a weak tag never matches strongly"
        );
        assert!(failed(&[("if-unmodified-since", &old)]));
        assert!(!failed(&[("if-unmodified-since", &new)]));
        assert!(!failed(&[("if-unmodified-since", "yesterday")]));
        assert!(!failed(&[
            ("if-match", "\"abc\""),
            ("if-unmodified-since", &old)
        ]));
    }
}
