//! `oai-bridge probe URL`: one plain HTTP/1.1 GET and its status code, for a container's
//! HEALTHCHECK. The runtime image (debian slim) has no curl; the binary asks its own `/healthz`
//! instead of the image carrying an HTTP client and its libraries for that alone. Blocking std
//! IO, no TLS, no redirects: it asks the gateway it runs beside.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use url::Url;

/// The longest status line read; the gateway's is about 20 bytes.
const MAX_STATUS_LINE: u64 = 1024;

/// GETs `url` (http only) and returns the answer's status code; `timeout` bounds the connection
/// and each read and write.
pub(crate) fn status(url: &str, timeout: Duration) -> Result<u16, String> {
    let url = Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!("{url}: only http:// URLs are probed"));
    }
    let host = url.host_str().ok_or_else(|| format!("{url}: no host"))?;
    let addrs = url
        .socket_addrs(|| Some(80))
        .map_err(|e| format!("{url}: cannot resolve {host}: {e}"))?;
    let addr = addrs
        .first()
        .ok_or_else(|| format!("{url}: {host} has no address"))?;
    let mut stream = TcpStream::connect_timeout(addr, timeout)
        .map_err(|e| format!("{url}: cannot connect to {addr}: {e}"))?;
    let io = |e: std::io::Error| format!("{url}: {e}");
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let authority = &url[url::Position::BeforeHost..url::Position::AfterPort];
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: oai-bridge-probe\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    let mut line = String::new();
    BufReader::new(stream.take(MAX_STATUS_LINE))
        .read_line(&mut line)
        .map_err(io)?;
    status_code(&line).ok_or_else(|| format!("{url}: not an HTTP status line: {line:?}"))
}

/// The code of a status line such as `HTTP/1.1 200 OK`.
fn status_code(line: &str) -> Option<u16> {
    let mut parts = line.split_ascii_whitespace();
    let version = parts.next()?;
    let code = parts.next()?;
    if !version.starts_with("HTTP/") || code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        for (line, want) in [
            ("HTTP/1.1 200 OK\r\n", Some(200)),
            ("HTTP/1.0 503 Service Unavailable\r\n", Some(503)),
            ("HTTP/1.1 204\r\n", Some(204)),
            ("HTTP/1.1 20 OK\r\n", None),
            ("SSH-2.0-OpenSSH_9.2\r\n", None),
            ("", None),
        ] {
            assert_eq!(status_code(line), want, "{line:?}");
        }
    }

    #[test]
    fn only_http_is_probed() {
        let err = status("https://127.0.0.1:1/healthz", Duration::from_secs(1)).unwrap_err();
        assert!(err.contains("only http://"), "{err}");
    }
}
