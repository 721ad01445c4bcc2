//! How this node connects to another node of its cluster, to forward a call
//! for a queue that node serves (`cluster/proxy.rs`).
//!
//! Nodes reach each other as clients reach them: a node that serves TLS
//! (`[tls]`) reaches the others over TLS, one that serves plaintext in
//! plaintext; the nodes of a cluster are configured alike. Over TLS the other
//! node must prove who it is: its certificate must chain to the cluster's CA
//! (`[cluster] ca-file`, by default `[tls] client-ca-file`) and name the host
//! of its advertised address (an IP address needs an IP SAN), as a client's
//! `https://` would check. This node presents its own `[tls]` certificate as
//! its client certificate when the other node asks for one (mutual TLS), so
//! that certificate must then allow client authentication too (extended key
//! usage `clientAuth`, or none) and chain to the other node's client CA.
//!
//! A node that stops answering (stalled, or cut off without a reset) is
//! given up within about a lease: each connection pings it every half lease
//! and closes when a ping is not answered within another half, which ends
//! the calls forwarded over it, so that their callers can follow the queue to
//! its next owner rather than wait for the stalled one to wake.
//!
//! The files are read again for every connection, so a certificate renewed
//! in place serves the next forwarded call without a restart, as the
//! listener's does after a reload (`tls.rs`). Their paths are read at
//! start-up.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rebound_protocol::v1::{
    admin_client::AdminClient, cluster_client::ClusterClient, messaging_client::MessagingClient,
};
use tonic::Status;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::grpc::MAX_GRPC_MESSAGE_BYTES;
use crate::security::forwarded::NodeSecret;

/// How long connecting to the serving node may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How this node connects to the others; plaintext by default.
#[derive(Debug, Default)]
pub struct Nodes {
    tls: Option<PeerTls>,
    /// The cluster's shared secret, to vouch for callers who logged in with
    /// a certificate (`security/forwarded.rs`); only over TLS.
    secret: Option<Arc<NodeSecret>>,
    /// The cluster's lease: a connection pings the other node every half
    /// lease, and waits as long for the answer; `None` for a single broker,
    /// which forwards nothing.
    lease: Option<Duration>,
}

/// The files of a TLS connection to another node, each with the config key
/// that named it (for errors).
#[derive(Debug)]
struct PeerTls {
    ca: (PathBuf, &'static str),
    cert: (PathBuf, &'static str),
    key: (PathBuf, &'static str),
}

impl Nodes {
    /// Over TLS: the other nodes' certificates must chain to a CA of
    /// `ca_file` (named in errors by `ca_key`, the config key it came from);
    /// `cert_file` and `key_file` are this node's `[tls]` certificate and
    /// key. The files are checked now, and the error names the key of the
    /// one at fault.
    pub fn tls(
        ca_file: PathBuf,
        ca_key: &'static str,
        cert_file: PathBuf,
        key_file: PathBuf,
    ) -> Result<Nodes, String> {
        let tls = PeerTls {
            ca: (ca_file, ca_key),
            cert: (cert_file, "tls.cert-file"),
            key: (key_file, "tls.key-file"),
        };
        // A made-up address: tonic builds the rustls configuration here,
        // which is what checks the files (the key fitting the certificate too).
        Endpoint::from_static("https://127.0.0.1:1")
            .tls_config(tls.config()?)
            .map_err(|e| {
                format!(
                    "TLS toward the other nodes ({}, {}, {}): {}",
                    tls.ca.1,
                    tls.cert.1,
                    tls.key.1,
                    causes(&e)
                )
            })?;
        Ok(Nodes {
            tls: Some(tls),
            ..Nodes::default()
        })
    }

    /// Vouches for callers with `secret` (over TLS only: the config refuses
    /// `secret-file` without `[tls]`).
    pub fn with_secret(self, secret: Arc<NodeSecret>) -> Nodes {
        Nodes {
            secret: Some(secret),
            ..self
        }
    }

    /// Gives up on a node that does not answer a ping within about `lease`
    /// (see the module docs).
    pub fn within_lease(self, lease: Duration) -> Nodes {
        Nodes {
            lease: Some(lease),
            ..self
        }
    }

    /// The cluster's lease, by which forwarded streams beat
    /// (`heartbeat.rs`); `None` for a single broker.
    pub(in crate::grpc) fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Names `user` to the node a call is forwarded to, with the cluster's
    /// secret in `metadata`; `false` without a secret.
    pub(in crate::grpc) fn vouch(&self, metadata: &mut tonic::metadata::MetadataMap, user: &str) -> bool {
        match &self.secret {
            Some(secret) => {
                secret.vouch(metadata, user);
                true
            }
            None => false,
        }
    }

    /// A connection to the node at `owner` (`host:port`, its advertised
    /// address); UNAVAILABLE, saying why, if it cannot be made.
    pub(in crate::grpc) async fn connect(&self, owner: &str) -> Result<Channel, Status> {
        let unreachable = |err: &str| {
            Status::unavailable(format!(
                "the node serving this queue, at {owner}, cannot be reached: {err}"
            ))
        };
        let endpoint = match &self.tls {
            None => Endpoint::from_shared(format!("http://{owner}")),
            Some(tls) => {
                let config = tls
                    .config()
                    .map_err(|e| unreachable(&e))?
                    .domain_name(host(owner));
                Endpoint::from_shared(format!("https://{owner}")).and_then(|e| e.tls_config(config))
            }
        };
        let mut endpoint = endpoint
            .map_err(|e| unreachable(&causes(&e)))?
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(keepalive) = self.lease.map(|lease| lease / 2) {
            endpoint = endpoint
                .http2_keep_alive_interval(keepalive)
                .keep_alive_timeout(keepalive)
                .keep_alive_while_idle(true);
        }
        endpoint.connect().await.map_err(|e| unreachable(&causes(&e)))
    }
}

// The clients of another node take and send messages as large as this node's
// own server does (tonic's default decoding limit is 4 MiB): a message that
// `max-message-size` allows passes through a forwarding node as through the
// node serving its queue.

/// A Messaging client of the node at the other end of `channel`.
pub(in crate::grpc) fn messaging(channel: Channel) -> MessagingClient<Channel> {
    MessagingClient::new(channel)
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES)
}

/// An Admin client of the node at the other end of `channel`.
pub(in crate::grpc) fn admin(channel: Channel) -> AdminClient<Channel> {
    AdminClient::new(channel)
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES)
}

/// A Cluster client of the node at the other end of `channel`.
pub(in crate::grpc) fn cluster(channel: Channel) -> ClusterClient<Channel> {
    ClusterClient::new(channel)
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES)
}

impl PeerTls {
    /// tonic's TLS configuration from the files as they are now.
    fn config(&self) -> Result<ClientTlsConfig, String> {
        let read = |(path, key): &(PathBuf, &str)| {
            std::fs::read(path).map_err(|e| format!("{key}: {}: cannot read file: {e}", path.display()))
        };
        Ok(ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read(&self.ca)?))
            .identity(Identity::from_pem(read(&self.cert)?, read(&self.key)?)))
    }
}

/// The host of `host:port`, as the other node's certificate must name it: an
/// IPv6 address without its brackets (tonic would take the URI's host with
/// them, which is no name a certificate holds).
fn host(owner: &str) -> String {
    match owner.parse::<std::net::SocketAddr>() {
        Ok(address) => address.ip().to_string(),
        Err(_) => owner.rsplit_once(':').map_or(owner, |(host, _)| host).to_owned(),
    }
}

/// An error with its causes: tonic's own message ("transport error") says
/// little, the rustls error underneath ("invalid peer certificate:
/// UnknownIssuer") says what to fix.
fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        // Some errors print their cause already.
        let next_text = next.to_string();
        if !text.ends_with(&next_text) {
            text.push_str(&format!(": {next_text}"));
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_to_verify_is_the_advertised_host() {
        assert_eq!(host("127.0.0.2:61616"), "127.0.0.2");
        assert_eq!(host("[::1]:61616"), "::1");
        assert_eq!(host("node-1.internal:61616"), "node-1.internal");
    }

    #[test]
    fn the_files_are_checked_at_start_up_naming_the_key_at_fault() {
        let dir = std::env::temp_dir().join(format!("rebound-peers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let node = rcgen::generate_simple_self_signed(vec!["127.0.0.2".to_owned()]).unwrap();
        let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.2".to_owned()]).unwrap();
        let ca = write("ca.pem", &node.cert.pem());
        let cert = write("node.pem", &node.cert.pem());
        let key = write("node.key", &node.signing_key.serialize_pem());
        let other_key = write("other.key", &stranger.signing_key.serialize_pem());

        Nodes::tls(ca.clone(), "cluster.ca-file", cert.clone(), key.clone()).unwrap();
        let mismatched = Nodes::tls(ca.clone(), "cluster.ca-file", cert.clone(), other_key).unwrap_err();
        assert!(mismatched.contains("tls.key-file"), "{mismatched}");
        let missing = Nodes::tls(dir.join("none.pem"), "tls.client-ca-file", cert, key).unwrap_err();
        assert!(
            missing.starts_with("tls.client-ca-file: ") && missing.contains("cannot read file"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
