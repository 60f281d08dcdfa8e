//! TLS to PostgreSQL (`[state] url`), with libpq's meanings of the URL's `sslmode`,
//! `sslrootcert`, `sslcert` and `sslkey`, on rustls (the TLS stack the binary has already).
//!
//! libpq's default `sslmode` is `prefer`: TLS when the server offers it, cleartext when it does
//! not, and no certificate checked either way. For a database on another machine that is
//! cleartext without a word, so the default here depends on the host: `prefer` for loopback
//! and Unix sockets (nothing crosses a network), `require` for any other host (TLS or no
//! connection), and `verify-full` with `sslrootcert=system`, as libpq 16 does. What checks no
//! certificate, or may fall back to cleartext, off loopback is said as a warning at start
//! ([`Tls::warning`]).
//!
//! tokio-postgres reads `sslmode` but knows only `disable`, `prefer` and `require`, and none of
//! the certificate settings: they are taken out of the URL here, and what it should check is
//! this module's verifier.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use postgres::config::{Host, SslMode as Wire};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The URL's query parameters this module reads (and takes out before tokio-postgres parses).
const PARAMETERS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// libpq's `sslmode` values (`allow`, cleartext first, is not offered: it protects nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Cleartext.
    Disable,
    /// TLS if the server offers it, else cleartext; no certificate checked.
    Prefer,
    /// TLS; no certificate checked, unless a root certificate is given (then as `VerifyCa`).
    Require,
    /// TLS; the server's certificate chains to a trusted root.
    VerifyCa,
    /// TLS; as `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(
                    "sslmode=allow is not supported (it tries cleartext first): give \
                     disable, prefer, require, verify-ca or verify-full"
                        .into(),
                );
            }
            other => {
                return Err(format!(
                    "sslmode={other:?} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                ));
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the trusted roots come from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Roots {
    /// `sslrootcert=system`: the system's trust store.
    System,
    /// `sslrootcert=<file>`: the PEM certificates in the file.
    File(PathBuf),
}

/// What the server's certificate is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// The TLS settings of a state URL, read and checked, and the connector made from them (its
/// files read once, when the configuration is).
#[derive(Clone)]
pub(crate) struct Tls {
    mode: SslMode,
    /// `mode` came from the URL, not from the default for its host.
    given: bool,
    roots: Option<Roots>,
    /// `sslcert`, for what is said of it.
    client_cert: Option<PathBuf>,
    /// Every host is loopback or a Unix socket.
    loopback: bool,
    connector: MakeRustlsConnect,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({})", self.describe())
    }
}

impl Tls {
    /// Takes this module's parameters out of `text` (a `postgres://` URL): the URL without
    /// them, for tokio-postgres, and their values, percent-decoded, in order.
    pub(super) fn split(text: &str) -> (String, Vec<(&'static str, String)>) {
        let Some((head, query)) = text.split_once('?') else {
            return (text.to_owned(), Vec::new());
        };
        let mut kept = Vec::new();
        let mut ours = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match PARAMETERS.iter().find(|k| **k == key) {
                Some(key) => ours.push((
                    *key,
                    percent_encoding::percent_decode_str(value)
                        .decode_utf8_lossy()
                        .into_owned(),
                )),
                None => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            head.to_owned()
        } else {
            format!("{head}?{}", kept.join("&"))
        };
        (rest, ours)
    }

    /// The settings `parameters` give (from [`Tls::split`]) for a database at `hosts`; the
    /// error names the parameter or file that is wrong.
    pub(super) fn new(
        parameters: &[(&'static str, String)],
        hosts: &[Host],
    ) -> Result<Tls, String> {
        let value = |key: &str| {
            (parameters.iter().rev())
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let roots = value("sslrootcert").map(|v| match v {
            "system" => Roots::System,
            file => Roots::File(PathBuf::from(file)),
        });
        let loopback = hosts.iter().all(|host| match host {
            Host::Unix(_) => true,
            Host::Tcp(name) => {
                name.eq_ignore_ascii_case("localhost")
                    || (name.trim_start_matches('[').trim_end_matches(']'))
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        });
        let given = value("sslmode").map(SslMode::parse).transpose()?;
        let mode = given.unwrap_or(match (&roots, loopback) {
            (Some(Roots::System), _) => SslMode::VerifyFull,
            (_, true) => SslMode::Prefer,
            (_, false) => SslMode::Require,
        });
        if roots == Some(Roots::System) && mode != SslMode::VerifyFull && mode != SslMode::Disable {
            return Err(format!(
                "sslrootcert=system may not be used with sslmode={}: the system's roots vouch \
                 for any host they issued to, so only verify-full checks something (give \
                 sslmode=verify-full)",
                mode.name()
            ));
        }
        let client = match (value("sslcert"), value("sslkey")) {
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (None, None) => None,
            (Some(_), None) => return Err("sslcert is given without sslkey: give both".into()),
            (None, Some(_)) => return Err("sslkey is given without sslcert: give both".into()),
        };
        let check = match (mode, &roots) {
            (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => Check::Nothing,
            // libpq: "if a root CA file exists, the behavior of sslmode=require will be the
            // same as that of verify-ca".
            (SslMode::Require | SslMode::VerifyCa, _) => Check::Chain,
            (SslMode::VerifyFull, _) => Check::ChainAndName,
        };
        let connector = match mode {
            // Never used: tokio-postgres does not start TLS with sslmode=disable.
            SslMode::Disable => connector(Check::Nothing, None, None)?,
            _ => connector(check, roots.as_ref(), client.as_ref())?,
        };
        Ok(Tls {
            mode,
            given: given.is_some(),
            roots,
            client_cert: client.map(|(cert, _)| cert),
            loopback,
            connector,
        })
    }

    /// The mode tokio-postgres negotiates with (what it checks is the connector's).
    pub(super) fn wire(&self) -> Wire {
        match self.mode {
            SslMode::Disable => Wire::Disable,
            SslMode::Prefer => Wire::Prefer,
            _ => Wire::Require,
        }
    }

    /// The connector for every connection to the database.
    pub(crate) fn connector(&self) -> MakeRustlsConnect {
        self.connector.clone()
    }

    /// What the settings are, for errors and `Debug`: `sslmode=verify-full, roots from
    /// /etc/ca.pem`.
    pub(crate) fn describe(&self) -> String {
        let mut said = format!("sslmode={}", self.mode.name());
        if !self.given {
            said.push_str(if self.loopback {
                " (the default for loopback)"
            } else {
                " (the default for a host that is not loopback)"
            });
        }
        if self.mode != SslMode::Disable {
            match &self.roots {
                Some(Roots::System) => said.push_str(", roots from the system's trust store"),
                Some(Roots::File(file)) => {
                    said.push_str(&format!(", roots from {}", file.display()))
                }
                None if matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull) => {
                    said.push_str(", roots from the system's trust store")
                }
                None => said.push_str(", the server's certificate not checked"),
            }
            if let Some(cert) = &self.client_cert {
                said.push_str(&format!(", client certificate {}", cert.display()));
            }
        }
        said
    }

    /// What is valid but unsafe off loopback, a sentence: cleartext, or a certificate nobody
    /// checks. `None` on loopback, and for verify-ca and verify-full.
    pub(crate) fn warning(&self) -> Option<String> {
        if self.loopback {
            return None;
        }
        let checked = matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull)
            || (self.mode == SslMode::Require && self.roots.is_some());
        match self.mode {
            SslMode::Disable => Some(
                "sslmode=disable to a host that is not loopback: the password and every record \
                 cross the network in cleartext"
                    .into(),
            ),
            SslMode::Prefer => Some(
                "sslmode=prefer to a host that is not loopback: cleartext when the server \
                 offers no TLS, and its certificate is not checked; give sslmode=verify-full \
                 and sslrootcert=<the CA's certificate file> (or system)"
                    .into(),
            ),
            _ if checked => None,
            _ => Some(format!(
                "{}: the connection is encrypted but anyone on the path can pose as the server; \
                 give sslmode=verify-full and sslrootcert=<the CA's certificate file> (or system)",
                self.describe()
            )),
        }
    }

    /// `error`, a failed connection's, when TLS is what failed (a certificate refused, or a
    /// server that offers no TLS to `require`): the error with its causes (tokio-postgres says
    /// only "error performing TLS handshake", the cause is rustls's) and the TLS settings.
    pub(crate) fn explain(&self, error: &(dyn std::error::Error + 'static)) -> Option<String> {
        let mut said = error.to_string();
        let mut tls = said.contains("TLS");
        let mut source = error.source();
        while let Some(e) = source {
            tls |= e.is::<rustls::Error>();
            said = format!("{said}: {e}");
            source = e.source();
        }
        tls.then(|| format!("{said} ({})", self.describe()))
    }
}

/// The crypto provider the rest of the binary's rustls uses (reqwest's, object_store's), named
/// rather than taken from the process default, which is ambiguous when two are compiled in.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A connector that checks what `check` says against `roots`, and presents `client`'s
/// certificate and key when given.
fn connector(
    check: Check,
    roots: Option<&Roots>,
    client: Option<&(PathBuf, PathBuf)>,
) -> Result<MakeRustlsConnect, String> {
    let provider = provider();
    let verifier: Arc<dyn ServerCertVerifier> = match check {
        Check::Nothing => Arc::new(Unchecked(provider.signature_verification_algorithms)),
        Check::Chain => Arc::new(AnyName(webpki(roots, &provider)?)),
        Check::ChainAndName => webpki(roots, &provider)?,
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS cannot be set up: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = certificates(cert, "sslcert")?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("sslkey {}: no private key read: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("sslcert and sslkey cannot be used together: {e}"))?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The certificates of the PEM file at `path` (`what`'s), at least one.
fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let read =
        |e: &dyn std::fmt::Display| format!("{what} {}: cannot be read: {e}", path.display());
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| read(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(&e))?;
    if certificates.is_empty() {
        return Err(format!(
            "{what} {}: holds no PEM certificate",
            path.display()
        ));
    }
    Ok(certificates)
}

/// The standard verifier (chain and host name) over `roots` (the system's when not given).
fn webpki(
    roots: Option<&Roots>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Some(Roots::File(path)) => {
            for certificate in certificates(path, "sslrootcert")? {
                (store.add(certificate)).map_err(|e| {
                    format!(
                        "sslrootcert {}: a certificate is not usable: {e}",
                        path.display()
                    )
                })?;
            }
        }
        Some(Roots::System) | None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(format!(
                    "the system's trust store holds no certificate ({} errors): give \
                     sslrootcert=<the CA's certificate file>",
                    found.errors.len()
                ));
            }
        }
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(store), Arc::clone(provider))
        .build()
        .map_err(|e| format!("TLS cannot be set up: {e}"))
}

/// `require` and `prefer` without roots: the handshake's signatures are checked (the session
/// is the certificate holder's) but not who holds it, as libpq does.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// `verify-ca`: the chain is checked, the host name is not. webpki checks the chain before the
/// name, so a name that does not match is the only error let through.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match (self.0).verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(name: &str) -> Vec<Host> {
        vec![Host::Tcp(name.to_owned())]
    }

    #[test]
    fn the_parameters_are_taken_out_of_the_url_and_decoded() {
        let (rest, ours) = Tls::split(
            "postgres://u:p@db:5432/oai?connect_timeout=3&sslmode=verify-full&sslrootcert=%2Fa%20b%2Fca.pem&application_name=x",
        );
        assert_eq!(
            rest,
            "postgres://u:p@db:5432/oai?connect_timeout=3&application_name=x"
        );
        assert_eq!(
            ours,
            [
                ("sslmode", "verify-full".to_owned()),
                ("sslrootcert", "/a b/ca.pem".to_owned())
            ]
        );
        assert_eq!(
            Tls::split("postgres://db/oai?sslmode=require").0,
            "postgres://db/oai"
        );
        assert_eq!(Tls::split("postgres://db/oai").0, "postgres://db/oai");
    }

    #[test]
    fn the_default_is_prefer_on_loopback_and_require_elsewhere() {
        for host in ["127.0.0.1", "localhost", "::1", "[::1]", "127.8.9.1"] {
            let tls = Tls::new(&[], &tcp(host)).unwrap();
            assert_eq!((tls.mode, tls.warning()), (SslMode::Prefer, None), "{host}");
        }
        let unix = Tls::new(&[], &[Host::Unix("/run/postgresql".into())]).unwrap();
        assert_eq!(unix.mode, SslMode::Prefer);
        let remote = Tls::new(&[], &tcp("db.example")).unwrap();
        assert_eq!(remote.wire(), Wire::Require);
        let warning = remote.warning().unwrap();
        assert!(
            warning.starts_with(
                "sslmode=require (the default for a host that is not loopback), the server's \
                 certificate not checked: "
            ),
            "{warning}"
        );
        // One remote host among loopback ones is enough to require TLS.
        let mixed = [tcp("127.0.0.1"), tcp("db.example")].concat();
        assert_eq!(Tls::new(&[], &mixed).unwrap().mode, SslMode::Require);
    }

    #[test]
    fn what_is_unsafe_off_loopback_is_said() {
        let with = |mode: &str| {
            Tls::new(&[("sslmode", mode.to_owned())], &tcp("db.example"))
                .unwrap()
                .warning()
        };
        assert!(with("disable").unwrap().contains("in cleartext"));
        assert!(
            with("prefer")
                .unwrap()
                .contains("cleartext when the server offers no TLS")
        );
        assert_eq!(with("verify-full"), None);
        assert_eq!(with("verify-ca"), None);
    }

    #[test]
    fn wrong_settings_are_named() {
        let err = |parameters: &[(&'static str, &str)]| {
            let owned: Vec<_> = parameters
                .iter()
                .map(|(k, v)| (*k, v.to_string()))
                .collect();
            Tls::new(&owned, &tcp("db.example")).unwrap_err()
        };
        assert!(err(&[("sslmode", "allow")]).starts_with("sslmode=allow is not supported"));
        assert!(err(&[("sslmode", "verify_full")]).starts_with("sslmode=\"verify_full\" is not"));
        assert!(
            err(&[("sslmode", "require"), ("sslrootcert", "system")])
                .starts_with("sslrootcert=system may not be used with sslmode=require")
        );
        assert_eq!(
            err(&[("sslcert", "/c.pem")]),
            "sslcert is given without sslkey: give both"
        );
        let missing = err(&[
            ("sslmode", "verify-full"),
            ("sslrootcert", "/nonexistent/ca.pem"),
        ]);
        assert!(
            missing.starts_with("sslrootcert /nonexistent/ca.pem: cannot be read"),
            "{missing}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let text = empty.display().to_string();
        assert_eq!(
            err(&[("sslmode", "verify-ca"), ("sslrootcert", &text)]),
            format!("sslrootcert {text}: holds no PEM certificate")
        );
    }

    #[test]
    fn sslrootcert_system_means_verify_full() {
        let system = Tls::new(&[("sslrootcert", "system".into())], &tcp("db.example"));
        // A machine whose trust store is empty says so; one with roots verifies fully.
        match system {
            Ok(tls) => assert_eq!((tls.mode, tls.warning()), (SslMode::VerifyFull, None)),
            Err(e) => assert!(
                e.starts_with("the system's trust store holds no certificate"),
                "{e}"
            ),
        }
    }
}
