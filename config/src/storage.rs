//! The keys that choose where the broker keeps its durable state: `storage`
//! (the engine), and for PostgreSQL `postgres-url`, `postgres-pool-size`,
//! `postgres-ca-file` and the client certificate the broker presents to the
//! database, `postgres-client-cert-file` with `postgres-client-key-file`.
//! All are read at start-up only. Whether a URL is present when `storage =
//! "postgres"` is the daemon's check, since `rebound serve --postgres-url`
//! (or its environment variable) may supply it instead of the file.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;

use toml::Spanned;

use crate::check::check_one;
use crate::error::{ConfigError, Document};
use crate::tls::{certificate_file, key_file};

/// Connections `postgres-pool-size` accepts: the committer needs one, reads
/// another.
pub const POSTGRES_POOL_SIZE_RANGE: RangeInclusive<usize> = 2..=256;

/// The engine behind the broker's store (`storage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StorageEngine {
    /// The embedded journal and sled, in `data-dir` (the default).
    #[default]
    Sled,
    /// A PostgreSQL database, `postgres-url`.
    Postgres,
}

impl FromStr for StorageEngine {
    type Err = String;

    fn from_str(value: &str) -> Result<StorageEngine, String> {
        match value {
            "sled" => Ok(StorageEngine::Sled),
            "postgres" => Ok(StorageEngine::Postgres),
            other => Err(format!(
                "must be \"sled\" or \"postgres\" (got \"{}\")",
                crate::excerpt(other)
            )),
        }
    }
}

impl fmt::Display for StorageEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StorageEngine::Sled => "sled",
            StorageEngine::Postgres => "postgres",
        })
    }
}

pub(crate) fn storage(value: String) -> Result<StorageEngine, String> {
    value.parse()
}

/// A `postgres://` or `postgresql://` URL, or a libpq `key=value` string;
/// the rest is the client's to judge when the broker connects.
pub(crate) fn postgres_url(value: String) -> Result<String, String> {
    let url = value.starts_with("postgres://") || value.starts_with("postgresql://");
    if url || value.contains('=') {
        Ok(value)
    } else {
        Err(
            "must be a postgres:// URL or a key=value connection string, e.g. \
             \"postgres://rebound@127.0.0.1:5432/rebound\""
                .to_owned(),
        )
    }
}

pub(crate) fn postgres_pool_size(value: i64) -> Result<usize, String> {
    let range = POSTGRES_POOL_SIZE_RANGE;
    usize::try_from(value)
        .ok()
        .filter(|size| range.contains(size))
        .ok_or_else(|| {
            format!(
                "must be between {} and {} (got {value})",
                range.start(),
                range.end()
            )
        })
}

/// The certificate the broker presents to the database, for a server that
/// authenticates its clients by certificate (`hostssl … cert` in
/// `pg_hba.conf`): both files or neither, and only over the TLS that
/// `postgres-ca-file` turns on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresClientCert {
    /// PEM file with the certificate chain, leaf first (`postgres-client-cert-file`).
    pub cert_file: PathBuf,
    /// PEM file with its private key (`postgres-client-key-file`).
    pub key_file: PathBuf,
}

/// Validates `postgres-client-cert-file` and `postgres-client-key-file`
/// together: both or neither, only with a CA (`with_ca`), each file PEM of
/// its kind. Whether the key fits the certificate is the store's check when
/// it opens.
pub(crate) fn postgres_client_cert(
    doc: &Document<'_>,
    cert: Option<Spanned<PathBuf>>,
    key: Option<Spanned<PathBuf>>,
    with_ca: bool,
) -> Result<Option<PostgresClientCert>, ConfigError> {
    const CERT: &str = "postgres-client-cert-file";
    const KEY: &str = "postgres-client-key-file";
    let (cert, key) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(cert), None) => {
            return Err(doc.error(
                cert.span().start,
                Some(CERT.into()),
                format!("needs `{KEY}` too, the PEM file of the certificate's private key"),
            ));
        }
        (None, Some(key)) => {
            return Err(doc.error(
                key.span().start,
                Some(KEY.into()),
                format!("needs `{CERT}` too, the PEM file of the certificate it belongs to"),
            ));
        }
    };
    if !with_ca {
        return Err(doc.error(
            cert.span().start,
            Some(CERT.into()),
            "needs `postgres-ca-file`: the certificate is presented over TLS, which verifies \
             the database with that CA",
        ));
    }
    Ok(Some(PostgresClientCert {
        cert_file: check_one(doc, cert, certificate_file, || CERT.into())?,
        key_file: check_one(doc, key, key_file, || KEY.into())?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_print_alike() {
        for engine in [StorageEngine::Sled, StorageEngine::Postgres] {
            assert_eq!(engine.to_string().parse(), Ok(engine));
        }
        assert_eq!(
            "mysql".parse::<StorageEngine>(),
            Err("must be \"sled\" or \"postgres\" (got \"mysql\")".to_owned())
        );
    }

    #[test]
    fn urls_and_pool_sizes() {
        assert!(postgres_url("postgresql://u@h/db".into()).is_ok());
        assert!(postgres_url("host=/tmp dbname=rebound".into()).is_ok());
        assert!(postgres_url("localhost:5432".into()).is_err());
        assert_eq!(postgres_pool_size(2), Ok(2));
        assert!(postgres_pool_size(1).is_err());
        assert!(postgres_pool_size(257).is_err());
    }

    #[test]
    fn a_client_certificate_needs_its_key_and_a_ca() {
        // PEM of the right kind is all the config checks; the store checks the pair fits.
        let (dir, cert, key) = crate::tls::fake_pem_pair("pg-client");
        let err = |text: String| crate::Config::parse(&text, "t.toml").unwrap_err().to_string();
        let ca = format!("postgres-ca-file = {cert:?}\n");
        let both = format!("postgres-client-cert-file = {cert:?}\npostgres-client-key-file = {key:?}\n");
        let config = crate::Config::parse(&format!("{ca}{both}"), "t.toml").unwrap();
        assert_eq!(
            config.postgres_client_cert,
            Some(PostgresClientCert {
                cert_file: cert.clone(),
                key_file: key.clone()
            })
        );
        assert_eq!(
            crate::Config::parse(&ca, "t.toml").unwrap().postgres_client_cert,
            None
        );
        let alone = err(format!("{ca}postgres-client-cert-file = {cert:?}\n"));
        assert!(
            alone.starts_with("t.toml:2:29: postgres-client-cert-file: needs `postgres-client-key-file` too"),
            "{alone}"
        );
        let key_alone = err(format!("{ca}\npostgres-client-key-file = {key:?}\n"));
        assert!(
            key_alone
                .starts_with("t.toml:3:28: postgres-client-key-file: needs `postgres-client-cert-file` too"),
            "{key_alone}"
        );
        let no_ca = err(both.clone());
        assert!(
            no_ca.starts_with("t.toml:1:29: postgres-client-cert-file: needs `postgres-ca-file`"),
            "{no_ca}"
        );
        let swapped = err(format!(
            "{ca}postgres-client-cert-file = {cert:?}\npostgres-client-key-file = {cert:?}\n"
        ));
        assert!(
            swapped.starts_with("t.toml:3:28: postgres-client-key-file: ")
                && swapped.ends_with("no PEM private key in the file"),
            "{swapped}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
