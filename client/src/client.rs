//! The connection to a broker and the messaging calls (send, consume).
//!
//! A [`Client`] is a tonic [`Channel`] plus the generated stubs; cloning it is
//! cheap and clones share the one HTTP/2 connection, so a program needs one.

use std::path::PathBuf;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic_health::pb::health_client::HealthClient;

use crate::consumer::{Consumer, ConsumerBuilder};
use crate::credentials::{Authorization, Credentials, Transport};
use crate::proto::admin_client::AdminClient;
use crate::proto::messaging_client::MessagingClient;
use crate::{Error, OutgoingMessage, Publisher, PublisherOptions, Result, SendResponse, proto};

/// The broker's documented default listen address.
pub const DEFAULT_URL: &str = "http://127.0.0.1:61616";

/// Largest message the client encodes or decodes. Far above any sensible broker
/// limit, so that an oversized message is refused by the broker's own
/// `max-message-size` check, whose error names the limit.
const MAX_GRPC_MESSAGE: usize = 64 * 1024 * 1024;

/// How long [`Client::connect`] tries before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// TLS settings for an `https://` URL: PEM files. The CA certificate is
/// required (the system's trust store is not used); the client certificate and
/// key, for a broker with `require-client-cert`, go together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// The CA certificate(s) the broker's certificate must chain to.
    pub ca_cert: Option<PathBuf>,
    /// This client's certificate chain (mutual TLS).
    pub client_cert: Option<PathBuf>,
    /// The private key of `client_cert`.
    pub client_key: Option<PathBuf>,
}

impl TlsOptions {
    /// tonic's client TLS config from the files; `None` without a CA.
    fn client_config(&self) -> Result<Option<ClientTlsConfig>> {
        let read = |path: &PathBuf, what: &str| {
            std::fs::read(path)
                .map_err(|e| Error::Tls(format!("cannot read the {what} {}: {e}", path.display())))
        };
        let Some(ca) = &self.ca_cert else {
            return Ok(None);
        };
        let mut config =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca, "CA certificate")?));
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                config = config.identity(Identity::from_pem(
                    read(cert, "client certificate")?,
                    read(key, "client key")?,
                ));
            }
            (None, None) => {}
            (Some(_), None) => return Err(Error::Tls("--client-cert needs --client-key".into())),
            (None, Some(_)) => return Err(Error::Tls("--client-key needs --client-cert".into())),
        }
        Ok(Some(config))
    }
}

/// How to connect: TLS and credentials. [`ConnectOptions::default`] is
/// plaintext (TLS only for an `https://` URL, with `tls.ca_cert`) and no login.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// TLS settings, used for an `https://` URL.
    pub tls: TlsOptions,
    /// The user to log in as, sent with every call; `None` = no login (a broker
    /// with users then refuses calls, unless a client certificate logs in).
    pub credentials: Option<Credentials>,
}

/// A connection to a rebound broker.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) messaging: MessagingClient<Transport>,
    pub(crate) admin: AdminClient<Transport>,
    pub(crate) health: HealthClient<Channel>,
}

impl Client {
    /// Connects to the broker at `url`: `http://host:port` or just `host:port`.
    ///
    /// Fails with [`Error::TlsUnsupported`] for an `https://` URL, which needs
    /// [`Client::connect_with`] and a CA certificate (tonic would otherwise dial
    /// it in plaintext), with [`Error::InvalidUrl`] for any other scheme but
    /// `http`, and with [`Error::Connect`] if the broker cannot be reached now;
    /// once connected, the channel reconnects by itself when the connection drops.
    pub async fn connect(url: &str) -> Result<Client> {
        Client::connect_with(url, &TlsOptions::default()).await
    }

    /// As [`Client::connect`], and an `https://` URL connects over TLS, verifying
    /// the broker against `tls.ca_cert` (without one it is refused with
    /// [`Error::TlsUnsupported`]). For `http://` the TLS options are ignored.
    pub async fn connect_with(url: &str, tls: &TlsOptions) -> Result<Client> {
        let options = ConnectOptions {
            tls: tls.clone(),
            credentials: None,
        };
        Client::connect_with_options(url, &options).await
    }

    /// As [`Client::connect_with`], and every call logs in with
    /// `options.credentials` (refused at once with [`Error::Credentials`] if
    /// they cannot be sent). A broker refuses wrong credentials with
    /// [`Code::Unauthenticated`](crate::Code) at the first call.
    pub async fn connect_with_options(url: &str, options: &ConnectOptions) -> Result<Client> {
        let tls = &options.tls;
        let authorization = Authorization(
            options
                .credentials
                .as_ref()
                .map(Credentials::header)
                .transpose()?,
        );
        let mut tls_config = None;
        let url = match url.split_once("://") {
            None => format!("http://{url}"),
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("http") => url.to_owned(),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => {
                match tls.client_config()? {
                    None => return Err(Error::TlsUnsupported { url: url.to_owned() }),
                    Some(config) => tls_config = Some(config),
                }
                format!("https://{rest}")
            }
            Some((scheme, _)) => {
                return Err(Error::InvalidUrl {
                    url: url.to_owned(),
                    reason: format!("unsupported scheme '{scheme}', use http:// or https://"),
                });
            }
        };
        let endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| Error::InvalidUrl {
                url: url.clone(),
                reason: innermost_cause(&e),
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .max_frame_size(rebound_protocol::MAX_FRAME_BYTES);
        let endpoint = match tls_config {
            None => endpoint,
            Some(config) => endpoint
                .tls_config(config)
                .map_err(|e| Error::Tls(innermost_cause(&e)))?,
        };
        let channel = endpoint.connect().await.map_err(|e| Error::Connect {
            url,
            reason: innermost_cause(&e),
        })?;
        Ok(Client {
            messaging: MessagingClient::with_interceptor(channel.clone(), authorization.clone())
                .max_decoding_message_size(MAX_GRPC_MESSAGE)
                .max_encoding_message_size(MAX_GRPC_MESSAGE),
            health: HealthClient::new(channel.clone()),
            admin: AdminClient::with_interceptor(channel, authorization)
                .max_decoding_message_size(MAX_GRPC_MESSAGE)
                .max_encoding_message_size(MAX_GRPC_MESSAGE),
        })
    }

    /// Sends one message and returns the id the broker gave it. Returns once the
    /// message is on disk if it is durable.
    pub async fn send(&self, message: OutgoingMessage) -> Result<u64> {
        only_id(self.send_batch(vec![message]).await?)
    }

    /// Sends one message and says what became of it: its id, and whether the broker
    /// found it a duplicate ([`OutgoingMessage::duplicate_id`]) and did not store it.
    pub async fn send_outcome(&self, message: OutgoingMessage) -> Result<Sent> {
        let response = self.send_batch(vec![message]).await?;
        let duplicate = response.duplicates.first().copied().unwrap_or(false);
        Ok(Sent {
            id: only_id(response)?,
            duplicate,
        })
    }

    /// Sends messages as one batch: the broker accepts or refuses them together and
    /// writes the durable ones in one storage commit. The response's `duplicates`
    /// flags, in request order, the messages found duplicates (empty when none was).
    pub async fn send_batch(&self, messages: Vec<OutgoingMessage>) -> Result<SendResponse> {
        let request = proto::SendRequest {
            messages: messages.into_iter().map(Into::into).collect(),
        };
        Ok(self.messaging.clone().send(request).await?.into_inner())
    }

    /// A [`Publisher`]: sends on one Publish stream, shared by every task that
    /// sends through it (or its clones), batched naturally. For many concurrent
    /// sends it is much cheaper than [`Client::send`], a call per message. Must be
    /// called within a Tokio runtime.
    pub fn publisher(&self) -> Publisher {
        self.publisher_with(PublisherOptions::default())
    }

    /// As [`Client::publisher`], batching as `options` say.
    pub fn publisher_with(&self, options: PublisherOptions) -> Publisher {
        Publisher::new(self.messaging.clone(), options)
    }

    /// A consumer of `queue`, to configure (window or manual credit, selector) and
    /// [`open`](ConsumerBuilder::open).
    pub fn consumer(&self, queue: &str) -> ConsumerBuilder {
        ConsumerBuilder::new(self.messaging.clone(), queue)
    }

    /// Shorthand for `consumer(queue).window(window).open()`: a steady window of
    /// `window` unsettled deliveries.
    pub async fn consume(&self, queue: &str, window: u32) -> Result<Consumer> {
        self.consumer(queue).window(window).open().await
    }

    /// Shorthand for `consumer(queue).manual_credit(initial_credit).open()`: no
    /// more deliveries than granted, for taking an exact number of messages.
    pub async fn consume_manual_credit(&self, queue: &str, initial_credit: u32) -> Result<Consumer> {
        self.consumer(queue).manual_credit(initial_credit).open().await
    }
}

/// The most specific description in an error's source chain: tonic's own messages
/// are generic ("transport error"), the OS error underneath says what happened;
/// a certificate the TLS library refuses gets a sentence saying what to do.
pub(crate) fn innermost_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let cause = match cause.downcast_ref::<std::io::Error>() {
        // `Connection refused (os error 111)` → `connection refused`.
        Some(io) if io.raw_os_error().is_some() => io.kind().to_string(),
        _ => cause.to_string(),
    };
    match certificate_advice(&cause) {
        Some(advice) => format!("{cause}: {advice}"),
        None => cause,
    }
}

/// What to do about a server certificate rustls refused, by the reason it
/// gives (its error names are stable, its messages are for programmers).
fn certificate_advice(cause: &str) -> Option<&'static str> {
    const ADVICE: [(&str, &str); 4] = [
        (
            "CaUsedAsEndEntity",
            "the broker's certificate is a CA certificate (as a self-signed `openssl req -x509` one \
             is), which TLS refuses as a server's own: give the broker a certificate signed by a CA \
             and the client that CA (`rebound tls dev-certs DIR` makes both for trying TLS)",
        ),
        (
            "UnknownIssuer",
            "the broker's certificate is not signed by the CA given (--ca-cert, REBOUND_CA_CERT): \
             give the CA that signed it",
        ),
        (
            "NotValidForName",
            "the broker's certificate does not name the host of the URL: connect to a name or \
             address it lists, or make one that lists it (`rebound tls dev-certs DIR --host NAME`)",
        ),
        (
            "Expired",
            "the broker's certificate has expired (or the clocks disagree): renew it",
        ),
    ];
    ADVICE
        .iter()
        .find(|(reason, _)| cause.contains(reason))
        .map(|&(_, advice)| advice)
}

/// What became of one message sent ([`Client::send_outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// The id the broker gave it (for a duplicate: an id that names nothing stored).
    pub id: u64,
    /// The address remembered its duplicate id: acknowledged, not stored again.
    pub duplicate: bool,
}

/// The id of a one-message send.
pub(crate) fn only_id(response: SendResponse) -> Result<u64> {
    match response.message_ids[..] {
        [id] => Ok(id),
        ref ids => Err(Error::Protocol(format!(
            "one message sent, {} ids returned",
            ids.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn refused_certificates_come_with_what_to_do() {
        for (reason, says) in [
            (
                "invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))",
                "rebound tls dev-certs",
            ),
            ("invalid peer certificate: UnknownIssuer", "--ca-cert"),
            ("invalid peer certificate: NotValidForName", "--host NAME"),
            ("invalid peer certificate: Expired", "renew"),
        ] {
            assert!(
                super::certificate_advice(reason).is_some_and(|a| a.contains(says)),
                "{reason}"
            );
        }
        assert_eq!(super::certificate_advice("connection refused"), None);
    }

    use super::*;

    #[tokio::test]
    async fn unreachable_broker_is_one_clear_error() {
        // Port 1 on loopback: nothing listens there.
        let err = Client::connect("127.0.0.1:1").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot connect to http://127.0.0.1:1: connection refused"
        );
    }

    #[tokio::test]
    async fn https_is_refused_not_dialled_in_plaintext() {
        // A listener that would accept a plaintext connection: the refusal must
        // come before any dialling, not from a failed handshake.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("HTTPS://{}", listener.local_addr().unwrap());
        let err = Client::connect(&url).await.unwrap_err();
        assert!(matches!(err, Error::TlsUnsupported { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("TLS needs the CA certificate that signed the broker's: give --ca-cert FILE"),
            "{err}"
        );
        let err = Client::connect("grpc://127.0.0.1:1").await.unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{err}");
    }

    #[tokio::test]
    async fn bad_url_is_refused() {
        let err = Client::connect("http://exa mple:1").await.unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{err}");
    }
}
