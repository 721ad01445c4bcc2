//! Accepting connections, on the gRPC listener and the HTTP one alike, so that
//! no peer can take what the broker needs to serve the others:
//! - each listener holds at most its bound (`max-connections`,
//!   `max-http-connections`), and one IP address at most its share of it
//!   (`max-connections-per-ip`), loopback too; at a bound a newcomer takes the
//!   place of the oldest connection that has made no call ([`registry`]), or
//!   is closed at accept if every one has — before any TLS handshake or
//!   HTTP/2 preface, the cheapest refusal there is. The WARN line that says
//!   so is rate-limited (one per 10 s, with the count refused since the last),
//!   so a flood cannot flood the log either;
//! - a connection that has not opened its protocol within
//!   `handshake-timeout-ms`, or has had no call under way for
//!   `idle-connection-timeout-ms`, is closed ([`Guarded`], swept here);
//! - both bounds stay below what the open-file limit leaves once the store
//!   has its reserve ([`handles`]), so connections run short before the store
//!   does.
//!
//! | file | what |
//! |---|---|
//! | `registry.rs` | the open connections of one listener, and who gives way when it is full |
//! | `guarded.rs` | a registered connection's IO: it sees the protocol opened, fails once closed, leaves the registry when dropped |
//! | `calls.rs` | a call under way, held until its response is done |
//! | `handles.rs` | file handles: the listeners' bounds within what the open-file limit leaves the store |
mod calls;
mod guarded;
pub mod handles;
mod registry;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::net::{TcpListener, TcpStream};
use tracing::warn;

pub use self::calls::Tracked;
pub use self::guarded::{Guarded, HTTP1_REQUEST_LINE, HTTP2_PREFACE};
pub use self::registry::{Bounds, Call, Closed, Conn, Full, Registration, Registry};
use crate::engine::Broker;
use crate::log_every::LogEvery;

/// At most one WARN line about refused connections per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// TCP keepalive of accepted gRPC connections.
const KEEPALIVE: Duration = Duration::from_secs(60);

/// Which listener accepts: each has its own bound and instruments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    Grpc,
    Http,
}

impl Listener {
    pub fn label(self) -> &'static str {
        match self {
            Listener::Grpc => "grpc",
            Listener::Http => "http",
        }
    }
}

/// A connection accepted and registered, its protocol not yet opened.
#[derive(Debug)]
pub struct Accepted {
    pub tcp: TcpStream,
    pub peer: SocketAddr,
    pub registration: Registration,
}

/// Takes connections from a listener's socket into its [`Registry`].
pub struct Acceptor {
    broker: Arc<Broker>,
    listener: TcpListener,
    kind: Listener,
    registry: Arc<Registry>,
    /// The most connections the open-file limit leaves this listener.
    handles: u64,
    /// The WARN about refused connections.
    refusals: LogEvery,
}

impl Acceptor {
    /// Accepts from `listener` for `kind`, at most `handles` connections
    /// whatever the limits say; the sweep of overdue connections runs as one
    /// of the broker's tasks.
    pub fn new(broker: Arc<Broker>, listener: TcpListener, kind: Listener, handles: u64) -> Acceptor {
        let gauge = match kind {
            Listener::Grpc => broker.metrics().connections.clone(),
            Listener::Http => broker.metrics().http_connections.clone(),
        };
        let registry = Arc::new(Registry::new(gauge));
        broker.spawn(sweep(broker.clone(), registry.clone(), kind));
        Acceptor {
            broker,
            listener,
            kind,
            registry,
            handles,
            refusals: LogEvery::default(),
        }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    fn bounds(&self) -> Bounds {
        let limits = self.broker.limits();
        let total = match self.kind {
            Listener::Grpc => limits.max_connections,
            Listener::Http => limits.max_http_connections,
        };
        Bounds {
            total: total.min(self.handles),
            per_ip: limits.max_connections_per_ip,
        }
    }

    /// The next connection admitted.
    pub async fn next(&mut self) -> Accepted {
        loop {
            let (tcp, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: do not spin.
                    warn!(%err, listener = self.kind.label(), "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let metrics = self.broker.metrics();
            match self.registry.admit(peer, self.bounds()) {
                Ok(admitted) => {
                    metrics.connections_closed(self.kind.label(), Closed::Evicted.label(), admitted.evicted);
                    if self.kind == Listener::Grpc {
                        let _ = tcp.set_nodelay(true);
                        let keepalive = socket2::TcpKeepalive::new().with_time(KEEPALIVE);
                        let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
                        metrics.connections_accepted.inc();
                    }
                    return Accepted {
                        tcp,
                        peer,
                        registration: admitted.registration,
                    };
                }
                Err(full) => {
                    drop(tcp);
                    self.refuse(peer, full);
                }
            }
        }
    }

    fn refuse(&mut self, peer: SocketAddr, full: Full) {
        let metrics = self.broker.metrics();
        if self.kind == Listener::Grpc {
            metrics.connections_refused.inc();
        }
        metrics.connections_closed(self.kind.label(), "refused", 1);
        let Some(refused) = self.refusals.event(WARN_EVERY) else {
            return;
        };
        let bound = match (full, self.kind) {
            (Full::Address(share), _) => format!("max-connections-per-ip ({share}) from {}", peer.ip()),
            (Full::Listener(total), Listener::Grpc) => format!("max-connections ({total})"),
            (Full::Listener(total), Listener::Http) => format!("max-http-connections ({total})"),
        };
        // `refused`: this one and those since the last such line.
        warn!(
            %peer,
            refused,
            listener = self.kind.label(),
            "connection closed at accept: {bound} are open, each busy or logged in"
        );
    }
}

/// The gRPC listener's connections, as a stream for tonic (TLS wraps them
/// first, in `tls.rs`).
pub fn incoming(acceptor: Acceptor) -> impl Stream<Item = Accepted> + Send + 'static {
    futures::stream::unfold(acceptor, |mut acceptor| async move {
        let next = acceptor.next().await;
        Some((next, acceptor))
    })
}

/// Closes, until the broker shuts down, the connections of `registry` that
/// are past their handshake or idle deadline (read at each round, so that a
/// reload applies).
async fn sweep(broker: Arc<Broker>, registry: Arc<Registry>, kind: Listener) {
    loop {
        let limits = broker.limits();
        let handshake = Duration::from_millis(limits.handshake_timeout_ms);
        let idle = Duration::from_millis(limits.idle_connection_timeout_ms);
        // Often enough that a deadline is kept to within a quarter of it.
        let round = (handshake / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::select! {
            _ = broker.shutdown().cancelled() => return,
            _ = tokio::time::sleep(round) => {}
        }
        for closed in registry.sweep(handshake, idle) {
            broker
                .metrics()
                .connections_closed(kind.label(), closed.label(), 1);
        }
    }
}
