//! TLS to Redis (`rediss://`), through the redis crate's rustls support:
//! the certificates a [`FleetBuilder`](crate::fleet::FleetBuilder) was
//! given, checked at `build()`, and the client made from them.
//!
//! Without settings, a `rediss://` URL verifies the server against the
//! system's roots. A CA certificate (PEM) replaces them, for a private CA;
//! a client certificate and key add mutual TLS. The key is a secret: it is
//! held in [`Secret`], which never prints, and no error shows any of it.

use std::fmt;
use std::sync::Arc;

use redis::{ClientTlsConfig, ConnectionAddr, ConnectionInfo, TlsCertificates};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;

use crate::ConfigError;

/// Bytes that are never shown: `Debug` prints `<redacted>`.
#[derive(Clone)]
pub(crate) struct Secret(Vec<u8>);

impl Secret {
    pub(crate) fn new(bytes: Vec<u8>) -> Secret {
        Secret(bytes)
    }

    /// The secret as text (a password).
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The TLS settings of a builder, as given.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsSettings {
    /// PEM certificates of the CA(s) to trust instead of the system's.
    pub(crate) ca: Option<Vec<u8>>,
    /// PEM certificate chain and private key, for mutual TLS.
    pub(crate) client: Option<(Vec<u8>, Secret)>,
}

impl TlsSettings {
    pub(crate) fn set_client(&mut self, cert: Vec<u8>, key: Vec<u8>) {
        self.client = Some((cert, Secret(key)));
    }

    /// The field of the first setting given, for errors.
    pub(crate) fn first_field(&self) -> Option<&'static str> {
        if self.ca.is_some() {
            Some("tls_ca")
        } else if self.client.is_some() {
            Some("tls_client_auth")
        } else {
            None
        }
    }
}

fn invalid(field: &'static str, rule: &'static str, value: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        rule,
        value: value.into(),
    }
}

/// The redis client for `info` with `tls`, every certificate and the key
/// checked first, so that a bad one is a [`ConfigError`] now rather than a
/// failed connection at every attempt later.
pub(crate) fn client(
    info: ConnectionInfo,
    tls: &TlsSettings,
) -> Result<redis::Client, ConfigError> {
    let insecure = match info.addr() {
        ConnectionAddr::TcpTls { insecure, .. } => *insecure,
        _ => {
            if let Some(field) = tls.first_field() {
                return Err(invalid(field, "needs a rediss:// URL", "a plain URL"));
            }
            return redis::Client::open(info).map_err(|_| url_refused());
        }
    };
    if insecure {
        return Err(invalid(
            "url",
            "must not turn off the server's certificate check (#insecure)",
            "(not shown, it may hold a password)",
        ));
    }
    match certificates(tls)? {
        None => redis::Client::open(info).map_err(|_| url_refused()),
        // The certificates were checked; what is left to fail is the redis
        // crate's own parse of the same PEM.
        Some(certificates) => {
            redis::Client::build_with_tls(info, certificates).map_err(|_| refused(tls))
        }
    }
}

/// The certificates of `tls` as the redis crate takes them (for a
/// Sentinel's master and a Cluster's nodes), each checked first; `None`
/// without settings (the system's roots).
pub(crate) fn certificates(tls: &TlsSettings) -> Result<Option<TlsCertificates>, ConfigError> {
    let provider = provider();
    let root_cert = tls.ca.as_deref().map(check_ca).transpose()?;
    let client_tls = match &tls.client {
        Some((cert, key)) => {
            check_client(cert, &key.0, &provider)?;
            Some(ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.0.clone(),
            })
        }
        None => None,
    };
    if root_cert.is_none() && client_tls.is_none() {
        return Ok(None);
    }
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// The error for certificates the redis crate refused after they were
/// checked.
pub(crate) fn refused(tls: &TlsSettings) -> ConfigError {
    invalid(
        tls.first_field().unwrap_or("url"),
        "was refused by the redis client",
        "(not shown)",
    )
}

/// The rule a URL the redis crate does not accept breaks.
pub(crate) const URL_RULE: &str =
    "must be a redis:// or rediss:// URL (redis://[user:password@]host:port/db)";

pub(crate) fn url_refused() -> ConfigError {
    invalid("url", URL_RULE, "(not shown, it may hold a password)")
}

/// The process's rustls crypto provider, installing ring's when none is.
///
/// The redis crate builds its TLS configuration with rustls' process-wide
/// default provider, which rustls picks by itself only when exactly one
/// provider is compiled in; an application whose other dependencies also
/// enable aws-lc-rs would otherwise get a panic on the agent thread at its
/// first connection. A provider the application installed is kept.
fn provider() -> Arc<CryptoProvider> {
    if let Some(installed) = CryptoProvider::get_default() {
        return Arc::clone(installed);
    }
    // Another thread may install one first: then that one is the default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .map(Arc::clone)
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The CA certificates: at least one, each usable as a trust anchor.
fn check_ca(pem: &[u8]) -> Result<Vec<u8>, ConfigError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert =
            cert.map_err(|e| invalid("tls_ca", "must be PEM certificates", e.to_string()))?;
        roots.add(cert).map_err(|e| {
            invalid(
                "tls_ca",
                "must hold CA certificates rustls can use as trust anchors",
                e.to_string(),
            )
        })?;
    }
    if roots.is_empty() {
        return Err(invalid(
            "tls_ca",
            "must hold at least one PEM certificate (-----BEGIN CERTIFICATE-----)",
            format!("{} bytes, none a certificate", pem.len()),
        ));
    }
    Ok(pem.to_vec())
}

/// The client certificate chain and its key: both parse, and the key is
/// the certificate's. Nothing of the key is ever shown.
fn check_client(cert: &[u8], key: &[u8], provider: &CryptoProvider) -> Result<(), ConfigError> {
    const FIELD: &str = "tls_client_auth";
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(FIELD, "certificate must be PEM", e.to_string()))?;
    if chain.is_empty() {
        return Err(invalid(
            FIELD,
            "certificate must hold at least one PEM certificate (-----BEGIN CERTIFICATE-----)",
            format!("{} bytes, none a certificate", cert.len()),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| {
        invalid(
            FIELD,
            "key must be a PEM private key (PKCS#8, PKCS#1 or SEC1)",
            "(not shown, a private key)",
        )
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|_| {
        invalid(
            FIELD,
            "key must be the certificate's, of a kind rustls signs with",
            "(not shown, a private key)",
        )
    })?;
    Ok(())
}
