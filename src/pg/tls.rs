//! TLS to a PostgreSQL server over TCP, with rustls (no OpenSSL to install anywhere), read from
//! the URL's libpq parameters: `sslmode` (`disable`, `prefer` (the default), `require`,
//! `verify-ca`, `verify-full`), `sslrootcert` (the certificate authorities to trust; libpq's
//! `~/.postgresql/root.crt` when absent), `sslcert` and `sslkey` (a client certificate).
//! As libpq does, `prefer` and `require` encrypt without checking who answers, `verify-ca`
//! checks the server's chain against `sslrootcert`, and `verify-full` also checks that the
//! certificate names the host. A Unix socket is never encrypted (libpq ignores `sslmode` there).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{LcmError, Result};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// The URL parameters this module reads (and takes out of what tokio-postgres is given).
pub(crate) const PARAMS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Whether a URL parameter is one of libpq's TLS parameters (read by this module, or refused).
pub(crate) fn is_tls_param(key: &str) -> bool {
    key.starts_with("ssl") || key == "requiressl"
}

/// What the URL asks of TLS.
#[derive(Clone, Debug)]
pub(crate) struct TlsSettings {
    pub mode: SslMode,
    root_cert: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    /// Reads the TLS parameters among `params` (name and percent-decoded value; None when the
    /// URL gives the name without `=`). As libpq, strictly: a parameter without a value, given
    /// twice, or one of libpq's TLS parameters that is not implemented here is E_INVALID_CONFIG
    /// naming it, never a silent default (`?sslmode` alone would otherwise be `prefer`, and
    /// `sslmode=disable&sslmode=verify-full` the first).
    pub(crate) fn read(params: &[(String, Option<String>)]) -> Result<TlsSettings> {
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in params {
            if !PARAMS.contains(&key.as_str()) {
                return Err(LcmError::invalid_config(
                    key.clone(),
                    format!("`{key}` is a TLS parameter of libpq that lcm-native does not implement; leave it out (lcm-native reads sslmode, sslrootcert, sslcert and sslkey)"),
                ));
            }
            if seen.contains(&key.as_str()) {
                return Err(LcmError::invalid_config(
                    key.clone(),
                    format!("`{key}` is given twice in the URL; give it once"),
                ));
            }
            seen.push(key);
            if value.as_deref().is_none_or(str::is_empty) {
                return Err(LcmError::invalid_config(
                    key.clone(),
                    format!("`{key}` has no value in the URL (`{key}=…`)"),
                ));
            }
        }
        let get = |name: &str| params.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.as_deref());
        let mode = match get("sslmode").unwrap_or("prefer") {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(LcmError::invalid_config(
                    "sslmode",
                    format!("sslmode={other}: expected disable, allow, prefer, require, verify-ca or verify-full"),
                ))
            }
        };
        if get("sslrootcert") == Some("system") {
            return Err(LcmError::invalid_config(
                "sslrootcert",
                "sslrootcert=system (the operating system's authorities) is not implemented here: give the authority's file as sslrootcert=PATH",
            ));
        }
        let client_cert = match (get("sslcert"), get("sslkey")) {
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            (None, None) => None,
            _ => {
                return Err(LcmError::invalid_input(
                    "sslcert and sslkey go together: give both (the client certificate and its key) or neither",
                ))
            }
        };
        Ok(TlsSettings {
            mode,
            root_cert: get("sslrootcert").map(PathBuf::from),
            client_cert,
        })
    }

    /// Whether the server's chain is checked against an authority: always for `verify-ca` and
    /// `verify-full`, and for `require` when a root certificate is there (given, or libpq's
    /// default file exists), as libpq does: "if a root CA file exists, the behavior of
    /// sslmode=require will be the same as that of verify-ca".
    fn checks_chain(&self) -> bool {
        match self.mode {
            SslMode::VerifyCa | SslMode::VerifyFull => true,
            SslMode::Require => self.root_cert.is_some() || default_root().exists(),
            SslMode::Disable | SslMode::Prefer => false,
        }
    }

    /// What tokio-postgres is told: whether to ask the server for TLS and whether it must be had.
    pub(crate) fn tokio_mode(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
        }
    }

    /// The rustls configuration for these settings: certificates read now, so that a missing or
    /// unreadable file is said at open, naming the file.
    pub(crate) fn client_config(&self) -> Result<ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| LcmError::Internal(format!("TLS protocol versions: {e}")))?;
        let chain = match self.checks_chain() {
            true => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider.clone())
                    .build()
                    .map_err(|e| LcmError::invalid_input(format!("sslrootcert: {e}")))?,
            ),
            false => None,
        };
        let verifier: Arc<dyn ServerCertVerifier> = match (self.mode, chain) {
            (SslMode::VerifyFull, Some(full)) => full,
            (_, chain) => Arc::new(Lenient { chain, provider }),
        };
        let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
        match &self.client_cert {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                let chain = certificates(cert, "sslcert")?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| LcmError::invalid_input(format!("sslkey {}: {e}", key.display())))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| LcmError::invalid_input(format!("sslcert/sslkey: {e}")))
            }
        }
    }

    /// The certificate authorities `verify-ca` and `verify-full` trust.
    fn roots(&self) -> Result<RootCertStore> {
        let path = match &self.root_cert {
            Some(p) => p.clone(),
            None => {
                let default = default_root();
                if !default.exists() {
                    return Err(LcmError::invalid_input(format!(
                        "sslmode={} checks the server's certificate: give the certificate authority as sslrootcert=PATH (libpq's default, {}, does not exist)",
                        if self.mode == SslMode::VerifyFull { "verify-full" } else { "verify-ca" },
                        default.display()
                    )));
                }
                default
            }
        };
        let mut roots = RootCertStore::empty();
        for cert in certificates(&path, "sslrootcert")? {
            roots
                .add(cert)
                .map_err(|e| LcmError::invalid_input(format!("sslrootcert {}: {e}", path.display())))?;
        }
        Ok(roots)
    }
}

/// libpq's root certificate file when `sslrootcert` is not given.
fn default_root() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".postgresql").join("root.crt")
}

/// The PEM certificates of `path` (E_INVALID_INPUT naming the parameter and file).
fn certificates(path: &Path, param: &str) -> Result<Vec<CertificateDer<'static>>> {
    let found: std::result::Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| LcmError::invalid_input(format!("{param} {}: {e}", path.display())))?
        .collect();
    let found = found.map_err(|e| LcmError::invalid_input(format!("{param} {}: {e}", path.display())))?;
    if found.is_empty() {
        return Err(LcmError::invalid_input(format!(
            "{param} {}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(found)
}

/// The checks libpq makes short of `verify-full`: none of who answers for `prefer` and
/// `require` (`chain` None), the chain up to a trusted authority but not the name for
/// `verify-ca`. The handshake's signatures are checked in every mode.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
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
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<TlsSettings> {
        let owned: Vec<(String, Option<String>)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect();
        TlsSettings::read(&owned)
    }

    #[test]
    fn a_parameter_without_a_value_twice_or_unknown_is_refused_naming_it() {
        let bare = TlsSettings::read(&[("sslmode".into(), None)]).unwrap_err();
        assert_eq!(bare.code(), "E_INVALID_CONFIG");
        assert!(
            bare.to_string().contains("sslmode") && bare.to_string().contains("no value"),
            "{bare}"
        );
        let e = read(&[("sslmode", "")]).unwrap_err();
        assert_eq!(e.code(), "E_INVALID_CONFIG");
        let e = read(&[("sslmode", "disable"), ("sslmode", "verify-full")]).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        for key in [
            "sslcrl",
            "sslpassword",
            "sslnegotiation",
            "requiressl",
            "ssl_min_protocol_version",
        ] {
            let e = read(&[(key, "1")]).unwrap_err();
            assert_eq!(e.code(), "E_INVALID_CONFIG", "{key}");
            assert!(e.to_string().contains(key), "{e}");
        }
        assert_eq!(
            read(&[("sslrootcert", "system")]).unwrap_err().code(),
            "E_INVALID_CONFIG"
        );
    }

    #[test]
    fn require_checks_the_chain_when_an_authority_is_given() {
        assert!(read(&[("sslmode", "require"), ("sslrootcert", "/x/ca.pem")])
            .unwrap()
            .checks_chain());
        assert!(read(&[("sslmode", "verify-ca")]).unwrap().checks_chain());
        assert!(!read(&[("sslmode", "prefer"), ("sslrootcert", "/x/ca.pem")])
            .unwrap()
            .checks_chain());
        // The authority is read at open: a missing one is named.
        let e = read(&[("sslmode", "require"), ("sslrootcert", "/nonexistent/ca.pem")])
            .unwrap()
            .client_config()
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn the_modes_are_libpqs() {
        assert_eq!(read(&[]).unwrap().mode, SslMode::Prefer);
        for (text, mode) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(read(&[("sslmode", text)]).unwrap().mode, mode);
        }
        let e = read(&[("sslmode", "strict")]).unwrap_err();
        assert_eq!(e.code(), "E_INVALID_CONFIG");
        assert!(e.to_string().contains("verify-full"), "{e}");
        let e = read(&[("sslcert", "/c.pem")]).unwrap_err();
        assert!(e.to_string().contains("sslkey"), "{e}");
    }

    #[test]
    fn a_missing_certificate_file_is_named() {
        let s = read(&[("sslmode", "verify-full"), ("sslrootcert", "/nonexistent/ca.pem")]).unwrap();
        let e = s.client_config().unwrap_err();
        assert_eq!(e.code(), "E_INVALID_INPUT");
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        // require needs no authority.
        read(&[("sslmode", "require")]).unwrap().client_config().unwrap();
    }
}
