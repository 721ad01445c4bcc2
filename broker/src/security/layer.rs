//! The authentication layer: a tower layer in front of every gRPC service, so
//! that no call or stream reaches a service without having logged in.
//!
//! It reads what the call brings (the `authorization` metadata, and the peer
//! address and verified client certificate that tonic attaches to each request
//! of a connection) and hands them to [`Authenticator::admit`] — the check the
//! HTTP endpoint makes too (`http/login.rs`) — which puts the
//! [`Principal`](super::Principal) in the request's extensions (services read it
//! with `tonic::Request::extensions`); a refusal is answered `UNAUTHENTICATED` here. The health
//! service is exempt, so that probes need no password. A call on which another
//! node of the cluster vouches for its caller is admitted as that caller only
//! with the cluster's secret (`forwarded.rs`), before and instead of the rest.
//!
//! It also tells the connection's registry (`crate::connections`) that a call
//! is under way until its response ends, and that an admitted one proved the
//! connection: such a connection never gives way to a newcomer.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

use super::authenticator::{Authenticator, audit_refusal};
use super::forwarded::{self, NodeSecret};
use crate::connections::{Registry, Tracked};

/// A verified client certificate chain, leaf first.
type Certificates = Arc<Vec<rustls::pki_types::CertificateDer<'static>>>;

/// The path prefix of the gRPC health service, which needs no login.
const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The layer; `Server::builder().layer(AuthLayer::new(authenticator, secret, connections))`.
#[derive(Clone, Debug)]
pub struct AuthLayer {
    authenticator: Arc<Authenticator>,
    /// The cluster's shared secret, with which another node may vouch for a
    /// caller it forwards (`forwarded.rs`); `None` = no node may.
    secret: Option<Arc<NodeSecret>>,
    /// The listener's open connections, told of each call.
    connections: Arc<Registry>,
}

impl AuthLayer {
    pub fn new(
        authenticator: Arc<Authenticator>,
        secret: Option<Arc<NodeSecret>>,
        connections: Arc<Registry>,
    ) -> AuthLayer {
        AuthLayer {
            authenticator,
            secret,
            connections,
        }
    }
}

impl<S> tower_layer::Layer<S> for AuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Authenticated<S> {
        Authenticated {
            inner,
            authenticator: self.authenticator.clone(),
            secret: self.secret.clone(),
            connections: self.connections.clone(),
        }
    }
}

/// A service behind the [`AuthLayer`].
#[derive(Clone, Debug)]
pub struct Authenticated<S> {
    inner: S,
    authenticator: Arc<Authenticator>,
    secret: Option<Arc<NodeSecret>>,
    connections: Arc<Registry>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower_service::Service<http::Request<B>> for Authenticated<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // The clone that was not polled ready stays here; the ready one serves the call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (peer, certificates) = connection(&request);
        let connections = self.connections.clone();
        if request.uri().path().starts_with(HEALTH_PREFIX) {
            // A probe keeps its connection busy, but proves nothing.
            let call = peer.and_then(|peer| connections.call(peer, false));
            return Box::pin(tracked(inner.call(request), call));
        }
        let authenticator = self.authenticator.clone();
        let vouched = forwarded::caller(request.headers(), self.secret.as_deref());
        Box::pin(async move {
            let admitted = match vouched {
                None => authenticator.admit(&mut request, peer, certificates).await,
                Some(Ok(user)) => authenticator.admit_vouched(&mut request, user, peer),
                Some(Err(not_a_node)) => {
                    audit_refusal(None, peer, "forwarded", &not_a_node);
                    return Ok(tonic::Status::unauthenticated(not_a_node.to_string()).into_http());
                }
            };
            match admitted {
                Ok(()) => {
                    let call = peer.and_then(|peer| connections.call(peer, true));
                    tracked(inner.call(request), call).await
                }
                Err(refused) => Ok(tonic::Status::unauthenticated(refused.to_string()).into_http()),
            }
        })
    }
}

/// The response of `response`, its call counted until its body is done.
async fn tracked<E>(
    response: impl Future<Output = Result<http::Response<Body>, E>>,
    call: Option<crate::connections::Call>,
) -> Result<http::Response<Body>, E> {
    Ok(response.await?.map(|body| Body::new(Tracked::new(body, call))))
}

/// The peer of `request`'s connection, and the client certificates its TLS
/// handshake verified.
fn connection<B>(request: &http::Request<B>) -> (Option<SocketAddr>, Option<Certificates>) {
    let extensions = request.extensions();
    match extensions.get::<TlsConnectInfo<TcpConnectInfo>>() {
        Some(tls) => (tls.get_ref().remote_addr(), tls.peer_certs()),
        None => (
            extensions
                .get::<TcpConnectInfo>()
                .and_then(TcpConnectInfo::remote_addr),
            None,
        ),
    }
}
