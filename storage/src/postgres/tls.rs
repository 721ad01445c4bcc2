//! TLS to the database, when the broker is given the CA that signed the
//! server's certificate (`postgres-ca-file`).
//!
//! Then every connection is encrypted and the server must prove who it is:
//! its certificate must chain to one of those CAs and name the host of the
//! URL, as libpq's `sslmode=verify-full`. Encryption without that check
//! (libpq's `require`) is not offered: it protects against a listener but
//! not against whoever answers in the server's place, and a managed database
//! publishes its CA for exactly this. Without a CA connections are plain, and
//! a URL that asks for TLS (`sslmode=require`) is refused when the store
//! opens rather than at the first connection.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::StorageError;

/// A TLS connector trusting exactly `roots`.
pub(super) fn connector(roots: &[CertificateDer<'static>]) -> Result<MakeRustlsConnect, StorageError> {
    let mut store = RootCertStore::empty();
    for cert in roots {
        store.add(cert.clone()).map_err(invalid)?;
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(invalid)?
            .with_root_certificates(store)
            .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn invalid(err: rustls::Error) -> StorageError {
    StorageError::Engine(Arc::new(err))
}
