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

/// What the URL asks of TLS.
#[derive(Clone, Debug)]
pub(crate) struct TlsSettings {
    pub mode: SslMode,
    root_cert: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    /// Reads the TLS parameters among `params` (`name=value`, percent-encoded).
    pub(crate) fn read(params: &[(String, String)]) -> Result<TlsSettings> {
        let get = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let mode = match get("sslmode").unwrap_or("prefer") {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(LcmError::invalid_input(format!(
                    "sslmode={other}: expected disable, prefer, require, verify-ca or verify-full"
                )))
            }
        };
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
        let chain = match self.mode {
            SslMode::VerifyCa | SslMode::VerifyFull => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots()?), provider.clone())
                    .build()
                    .map_err(|e| LcmError::invalid_input(format!("sslrootcert: {e}")))?,
            ),
            _ => None,
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
                let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
                let default = home.join(".postgresql").join("root.crt");
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
        let owned: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        TlsSettings::read(&owned)
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
        assert_eq!(e.code(), "E_INVALID_INPUT");
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
