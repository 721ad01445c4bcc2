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
//!
//! A server that authenticates its clients by certificate (`hostssl … cert`
//! in `pg_hba.conf`) gets the [`ClientIdentity`] the store was given, on
//! every connection: the pool's and the one that listens for notifications.
//! Only over verified TLS: a certificate is no proof to offer an unverified
//! server.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::StorageError;

/// A certificate chain (leaf first) and its private key, presented to the
/// database as the store's client certificate.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> ClientIdentity {
        ClientIdentity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// A TLS connector trusting exactly `roots`, presenting `identity` when given.
pub(super) fn connector(
    roots: &[CertificateDer<'static>],
    identity: Option<&ClientIdentity>,
) -> Result<MakeRustlsConnect, StorageError> {
    let mut store = RootCertStore::empty();
    for cert in roots {
        store.add(cert.clone()).map_err(invalid)?;
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(invalid)?
            .with_root_certificates(store);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(identity) => builder
            .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
            .map_err(|e| {
                StorageError::refused(format!(
                    "the client certificate and key for the database (postgres-client-cert-file, \
                     postgres-client-key-file) cannot be used: {e}"
                ))
            })?,
    };
    Ok(MakeRustlsConnect::new(config))
}

fn invalid(err: rustls::Error) -> StorageError {
    StorageError::Engine(Arc::new(err))
}
