//! The `[tls]` table: the broker's certificate and key, and optionally the CA
//! that client certificates must chain to (mutual TLS).
//!
//! ```toml
//! [tls]
//! cert-file = "/etc/rebound/server.pem"      # PEM: the certificate chain, leaf first
//! key-file = "/etc/rebound/server.key"       # PEM: its private key (PKCS#8, PKCS#1 or SEC1)
//! client-ca-file = "/etc/rebound/clients.pem" # PEM: CAs a client certificate must chain to
//! require-client-cert = true                 # refuse clients without one (needs client-ca-file)
//! ```
//!
//! Paths are relative to the broker's working directory, as `data-dir`. The
//! files are read and checked while the config loads (so `rebound config
//! check`, start-up and a reload all refuse a missing file or one without a
//! certificate or key, naming the file and the key); the broker reads them
//! again on every reload, so a renewed certificate needs no restart.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use toml::Spanned;

use crate::check::{check_one, checked};
use crate::error::{ConfigError, Document};

/// The validated `[tls]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM file with the broker's certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM file with the private key of the leaf certificate.
    pub key_file: PathBuf,
    /// PEM file with the CA certificates client certificates are verified
    /// against; `None` = client certificates are not asked for.
    pub client_ca_file: Option<PathBuf>,
    /// Refuse a client that presents no certificate (mutual TLS).
    pub require_client_cert: bool,
}

/// `[tls]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawTls {
    cert_file: Option<Spanned<PathBuf>>,
    key_file: Option<Spanned<PathBuf>>,
    client_ca_file: Option<Spanned<PathBuf>>,
    require_client_cert: Option<Spanned<bool>>,
}

/// Reads the certificates of a PEM file; at least one.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {}", path.display(), pem_error(e)))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in the file", path.display()));
    }
    Ok(certs)
}

/// Reads the private key of a PEM file (the first one).
pub fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            format!("{}: no PEM private key in the file", path.display())
        }
        e => format!("{}: {}", path.display(), pem_error(e)),
    })
}

/// A PEM file that holds at least one certificate, as the config checks it
/// (relative paths from the broker's working directory, as `data-dir`).
pub(crate) fn certificate_file(path: PathBuf) -> Result<PathBuf, String> {
    read_certificates(&path).map(|_| path)
}

/// A PEM file that holds a private key, as the config checks it.
pub(crate) fn key_file(path: PathBuf) -> Result<PathBuf, String> {
    read_private_key(&path).map(|_| path)
}

fn pem_error(error: rustls_pki_types::pem::Error) -> String {
    match error {
        rustls_pki_types::pem::Error::Io(io) => format!("cannot read file: {io}"),
        e => format!("not a valid PEM file: {e}"),
    }
}

impl RawTls {
    /// Validates the table at `table_start` (the offset of `[tls]`).
    pub(crate) fn validate(self, doc: &Document<'_>, table_start: usize) -> Result<TlsConfig, ConfigError> {
        let missing = |key: &str| {
            doc.error(
                table_start,
                Some(format!("tls.{key}")),
                format!("[tls] needs `{key}` (a PEM file)"),
            )
        };
        let cert_file = check_one(
            doc,
            self.cert_file.ok_or_else(|| missing("cert-file"))?,
            certificate_file,
            || "tls.cert-file".into(),
        )?;
        let key_file = check_one(
            doc,
            self.key_file.ok_or_else(|| missing("key-file"))?,
            key_file,
            || "tls.key-file".into(),
        )?;
        let client_ca_file = checked(doc, self.client_ca_file, certificate_file, || {
            "tls.client-ca-file".into()
        })?;
        let require_client_cert = match self.require_client_cert {
            Some(value) if *value.get_ref() && client_ca_file.is_none() => {
                return Err(doc.error(
                    value.span().start,
                    Some("tls.require-client-cert".into()),
                    "needs `client-ca-file`, the CA that client certificates must chain to",
                ));
            }
            Some(value) => value.into_inner(),
            None => false,
        };
        Ok(TlsConfig {
            cert_file,
            key_file,
            client_ca_file,
            require_client_cert,
        })
    }
}

/// A directory `rebound-<name>-<pid>` under the temp dir with `c.pem` and
/// `k.pem`: PEM of the right kinds around bytes that are no key at all,
/// which is as far as the config looks. The caller removes the directory.
#[cfg(test)]
pub(crate) fn fake_pem_pair(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("rebound-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    (dir, cert, key)
}

#[cfg(test)]
mod tests {
    use super::{certificate_file, fake_pem_pair};
    use crate::Config;

    #[test]
    fn a_certificate_file_must_hold_a_certificate() {
        // PEM of the right kind is all the config checks; the TLS handshake judges the rest.
        let (dir, ca, _) = fake_pem_pair("ca-file");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        assert_eq!(certificate_file(ca.clone()), Ok(ca));
        let refused = certificate_file(empty).unwrap_err();
        assert!(refused.ends_with("no PEM certificate in the file"), "{refused}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn err(text: &str) -> String {
        Config::parse(text, "test.toml")
            .expect_err("should be refused")
            .to_string()
    }

    #[test]
    fn cert_and_key_are_required_and_files_must_exist() {
        assert_eq!(
            err("[tls]\nkey-file = \"k.pem\"\n"),
            "test.toml:1:1: tls.cert-file: [tls] needs `cert-file` (a PEM file)"
        );
        let missing = err("[tls]\ncert-file = \"/nonexistent/rebound/c.pem\"\nkey-file = \"k\"\n");
        assert!(
            missing
                .starts_with("test.toml:2:13: tls.cert-file: /nonexistent/rebound/c.pem: cannot read file: "),
            "{missing}"
        );
        assert!(err("[tls]\ncert-fil = \"c\"\n").contains("unknown field"));
    }

    #[test]
    fn require_client_cert_needs_a_client_ca() {
        // The config only checks that they are PEM of the right kind; the broker
        // checks that they fit together.
        let (dir, cert, key) = fake_pem_pair("tls-config");
        let base = format!("[tls]\ncert-file = {cert:?}\nkey-file = {key:?}\n");
        let config = Config::parse(&base, "test.toml").unwrap();
        let tls = config.tls.unwrap();
        assert_eq!((tls.cert_file, tls.key_file), (cert.clone(), key.clone()));
        assert_eq!((tls.client_ca_file, tls.require_client_cert), (None, false));
        let refused = err(&format!("{base}require-client-cert = true\n"));
        assert!(
            refused.starts_with("test.toml:4:23: tls.require-client-cert: needs `client-ca-file`"),
            "{refused}"
        );
        let mutual = Config::parse(
            &format!("{base}client-ca-file = {cert:?}\nrequire-client-cert = true\n"),
            "test.toml",
        )
        .unwrap();
        assert!(mutual.tls.unwrap().require_client_cert);
        let no_key = err(&format!("[tls]\ncert-file = {cert:?}\nkey-file = {cert:?}\n"));
        assert!(
            no_key.contains("tls.key-file: ") && no_key.contains("no PEM private key"),
            "{no_key}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
