//! Accepting client connections for the gRPC server: each one counted while it
//! is open (the `rebound_connections` metrics) and, beyond `max-connections`
//! open at once, closed as soon as it is accepted — plaintext and TLS alike,
//! as both listeners take their connections from [`accept`].
//!
//! Closing at accept, before any TLS handshake or HTTP/2 preface, is the
//! cheapest refusal there is: a flood of connections costs the broker an
//! accept and a close each, never a task or a buffer. The WARN line that says
//! so is rate-limited (one per 10 s, with the count refused since
//! the last), so the flood cannot flood the log either.
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::Connected;
use tracing::warn;

use crate::engine::Broker;

/// At most one WARN line about refused connections per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Keeps a connection counted in the open-connections gauge while it lives.
#[derive(Debug)]
pub struct OpenGuard(Gauge);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A connection that is counted as open until it is dropped.
#[derive(Debug)]
pub struct Counted<IO> {
    io: IO,
    _open: OpenGuard,
}

impl<IO> Counted<IO> {
    /// The connection and its guard, to wrap the connection (a TLS handshake).
    pub fn into_parts(self) -> (IO, OpenGuard) {
        (self.io, self._open)
    }

    pub fn new(io: IO, open: OpenGuard) -> Counted<IO> {
        Counted { io, _open: open }
    }
}

/// Accepts connections on `listener` for as long as the stream is polled:
/// no Nagle (a delivery or an acknowledgement is small and must not wait for
/// the peer's delayed ACK, which cost a ~40 ms tail on every workload), TCP
/// keepalive, and at most `max-connections` (read at each accept, so a reload
/// applies) open at once.
pub fn accept(
    broker: Arc<Broker>,
    listener: TcpListener,
    keepalive: Duration,
) -> impl Stream<Item = io::Result<Counted<TcpStream>>> + Send + 'static {
    let acceptor = Acceptor {
        broker,
        listener,
        keepalive,
        warned: None,
        refused: 0,
    };
    futures::stream::unfold(acceptor, |mut acceptor| async move {
        let next = acceptor.next().await;
        Some((Ok::<_, io::Error>(next), acceptor))
    })
}

struct Acceptor {
    broker: Arc<Broker>,
    listener: TcpListener,
    keepalive: Duration,
    /// When the last WARN about refused connections was logged.
    warned: Option<Instant>,
    /// Connections refused since then.
    refused: u64,
}

impl Acceptor {
    async fn next(&mut self) -> Counted<TcpStream> {
        loop {
            let (tcp, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: do not spin.
                    warn!(%err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let metrics = self.broker.metrics();
            let limit = self.broker.limits().max_connections;
            if u64::try_from(metrics.connections.get()).unwrap_or(0) >= limit {
                drop(tcp);
                metrics.connections_refused.inc();
                self.refused += 1;
                if self.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    // `refused`: this one and those since the last such line.
                    warn!(
                        %peer,
                        refused = self.refused,
                        "connection closed at accept: max-connections ({limit}) are open"
                    );
                    self.warned = Some(Instant::now());
                    self.refused = 0;
                }
                continue;
            }
            let _ = tcp.set_nodelay(true);
            let keepalive = socket2::TcpKeepalive::new().with_time(self.keepalive);
            let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
            metrics.connections.inc();
            metrics.connections_accepted.inc();
            return Counted::new(tcp, OpenGuard(metrics.connections.clone()));
        }
    }
}

impl<IO: Connected> Connected for Counted<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
