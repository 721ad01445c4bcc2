//! TLS for the gRPC listener (`[tls]` in the config), with rustls.
//!
//! tonic's own `ServerTlsConfig` is fixed at start-up; to let a renewed
//! certificate take effect without a restart, the daemon accepts TCP itself
//! ([`crate::connections`], which also bounds connections and their handshake time) and
//! wraps each connection with the [`TlsServer`]'s current rustls
//! `ServerConfig`. A config reload builds a whole new `ServerConfig` from the
//! files (certificate, key, and client CA for mutual TLS) and swaps it in;
//! connections already open keep the one they started with, new ones get the
//! new one. A reload whose files do not make a valid configuration is rejected
//! and the certificate in force stays.
use std::io;
use std::sync::{Arc, RwLock};

use futures::{Stream, StreamExt};
use rebound_config::TlsConfig;
use rebound_config::tls::{read_certificates, read_private_key};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::connections::{Accepted, Guarded, HTTP2_PREFACE};

/// The TLS side of the listener: the rustls configuration in force.
pub struct TlsServer {
    current: RwLock<TlsAcceptor>,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer").finish_non_exhaustive()
    }
}

impl TlsServer {
    /// Reads the files of `[tls]`; the error says which key's file is wrong and why.
    pub fn new(config: &TlsConfig) -> Result<TlsServer, String> {
        Ok(TlsServer {
            current: RwLock::new(acceptor(config)?),
        })
    }

    /// Re-reads the files and, if they make a valid configuration, uses it for
    /// the connections accepted from now on; otherwise the one in force stays.
    pub fn prepare(config: &TlsConfig) -> Result<TlsAcceptor, String> {
        acceptor(config)
    }

    /// Puts a configuration made by [`TlsServer::prepare`] in force.
    pub fn install(&self, acceptor: TlsAcceptor) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
    }

    fn acceptor(&self) -> TlsAcceptor {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes the connections `accepted` yields until `stop` fires, and hands
    /// each one, once its TLS handshake is done, to the returned stream (for
    /// tonic's `serve_with_incoming_shutdown`). A failed handshake only costs
    /// its own connection; one the broker closes meanwhile (past
    /// `handshake-timeout-ms`, or evicted for a newcomer) is dropped.
    pub fn incoming(
        self: Arc<Self>,
        accepted: impl Stream<Item = Accepted> + Send + 'static,
        stop: CancellationToken,
    ) -> tokio_stream::wrappers::ReceiverStream<io::Result<Guarded<TlsStream<TcpStream>>>> {
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut accepted = std::pin::pin!(accepted);
            loop {
                let Accepted {
                    tcp,
                    peer,
                    registration,
                } = tokio::select! {
                    next = accepted.next() => match next {
                        Some(accepted) => accepted,
                        None => return,
                    },
                    _ = stop.cancelled() => return,
                    _ = tx.closed() => return,
                };
                let acceptor = self.acceptor();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let closing = registration.conn().closing().clone();
                    tokio::select! {
                        handshake = acceptor.accept(tcp) => match handshake {
                            Ok(tls) => {
                                let tls = Guarded::new(tls, registration, HTTP2_PREFACE);
                                let _ = tx.send(Ok(tls)).await;
                            }
                            Err(err) => debug!(%peer, %err, "TLS handshake failed"),
                        },
                        _ = closing.cancelled() => debug!(%peer, "TLS handshake cut short"),
                    }
                });
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls acceptor from the files of `[tls]`, offering HTTP/2 only (gRPC).
fn acceptor(config: &TlsConfig) -> Result<TlsAcceptor, String> {
    let provider = provider();
    let certs = read_certificates(&config.cert_file).map_err(|e| format!("tls.cert-file: {e}"))?;
    let key = read_private_key(&config.key_file).map_err(|e| format!("tls.key-file: {e}"))?;
    let certified = CertifiedKey::from_der(certs, key, &provider).map_err(|e| {
        format!(
            "tls.key-file: {}: does not fit the certificate of tls.cert-file {}: {e}",
            config.key_file.display(),
            config.cert_file.display()
        )
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match &config.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certificates(path).map_err(|e| format!("tls.client-ca-file: {e}"))? {
                roots
                    .add(cert)
                    .map_err(|e| format!("tls.client-ca-file: {}: {e}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if config.require_client_cert {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("tls.client-ca-file: {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
    server.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(server)))
}
