//! A registered connection's IO: it notices when the peer has opened its
//! protocol, fails once the broker closes it, and leaves the registry when
//! dropped.
//!
//! Closing works through the IO because the servers (tonic, axum) own their
//! connections: a read that fails ends the connection in hyper, which drops
//! this, which frees the connection's place.
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::WaitForCancellationFutureOwned;
use tonic::transport::server::Connected;

use super::registry::Registration;

/// The bytes that show a gRPC peer speaks HTTP/2: the client preface.
pub const HTTP2_PREFACE: usize = 24;
/// The bytes that show an HTTP/1 peer speaks: the shortest request line
/// (`GET / HTTP/1.1\r\n`).
pub const HTTP1_REQUEST_LINE: usize = 16;

/// `IO` of a registered connection.
pub struct Guarded<IO> {
    io: IO,
    registration: Registration,
    /// Bytes still to read before the peer counts as having opened its protocol.
    to_greet: usize,
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<IO> std::fmt::Debug for Guarded<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("registration", &self.registration)
            .finish_non_exhaustive()
    }
}

impl<IO> Guarded<IO> {
    /// `io`, counted as greeted once `greeting` bytes were read from it.
    pub fn new(io: IO, registration: Registration, greeting: usize) -> Guarded<IO> {
        let closing = Box::pin(registration.conn().closing().clone().cancelled_owned());
        Guarded {
            io,
            registration,
            to_greet: greeting,
            closing,
        }
    }

    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    fn closed(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.closing
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::ConnectionAborted, "closed by the broker"))
    }
}

impl<IO: Connected> Connected for Guarded<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(err) = self.closed(cx) {
            return Poll::Ready(Err(err));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        if self.to_greet > 0 {
            let got = buf.filled().len() - before;
            self.to_greet = self.to_greet.saturating_sub(got);
            if self.to_greet == 0 {
                self.registration.conn().greeted();
            }
        }
        read
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(err) = self.closed(cx) {
            return Poll::Ready(Err(err));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(err) = self.closed(cx) {
            return Poll::Ready(Err(err));
        }
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
