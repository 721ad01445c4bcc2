//! The keys that choose where the broker keeps its durable state: `storage`
//! (the engine), and for PostgreSQL `postgres-url`, `postgres-pool-size` and
//! `postgres-ca-file`.
//! All are read at start-up only. Whether a URL is present when `storage =
//! "postgres"` is the daemon's check, since `rebound serve --postgres-url`
//! (or its environment variable) may supply it instead of the file.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;

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

/// A PEM file of CA certificates, at least one (relative paths from the
/// broker's working directory, as `data-dir`).
pub(crate) fn postgres_ca_file(path: PathBuf) -> Result<PathBuf, String> {
    crate::tls::read_certificates(&path).map(|_| path)
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
    fn a_ca_file_must_hold_a_certificate() {
        let dir = std::env::temp_dir().join(format!("rebound-pg-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, empty) = (dir.join("ca.pem"), dir.join("empty.pem"));
        // PEM of the right kind is all the config checks; the TLS handshake judges the rest.
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(&empty, "").unwrap();
        assert_eq!(postgres_ca_file(ca.clone()), Ok(ca));
        let refused = postgres_ca_file(empty).unwrap_err();
        assert!(refused.ends_with("no PEM certificate in the file"), "{refused}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
