//! The HTTP endpoint (`http-listen`, default `127.0.0.1:8161`): health probes
//! and Prometheus metrics, for the tools that speak HTTP rather than gRPC
//! (Kubernetes probes, Prometheus, a browser).
//!
//! It is a listener of its own, beside the gRPC one, so that scraping and
//! probing never compete with clients for the gRPC connection limits, and so
//! that it can stay on loopback while gRPC is exposed. [`router`] builds every
//! route; a module adds its routes by returning a `Router<HttpState>` that
//! [`router`] merges:
//! - `operator_routes`: what shows or changes the broker (metrics, and
//!   the web console, [`console`]). They sit behind [`login`], which
//!   authenticates every request against the broker's users (HTTP basic) and
//!   covers all of them and only them; what each caller may then see or do is
//!   checked by `security::access`, as on gRPC;
//! - `/health/*` stays outside it: probes carry no credentials.
//!
//! In front of the login, the operator routes answer only requests whose `Host`
//! names this endpoint ([`host`]), against DNS rebinding; the probes answer any.
//!
//! Without users the endpoint obeys the rule of gRPC's listener
//! (`security::anonymous`): loopback only unless `allow-anonymous = true`.
//!
//! Its connections are bounded and timed like gRPC's (`crate::connections`):
//! `max-http-connections`, the per-address share, the handshake and idle
//! timeouts; a request under way is a call.
//!
//! The server stops when the daemon tells it to, after the gRPC server has
//! drained (so `/health/ready` answers 503 during the drain).
//!
//! | file | what |
//! |---|---|
//! | `health.rs` | `GET /health/live` and `GET /health/ready`, for probes and load balancers |
//! | `metrics.rs` | `GET /metrics`: the registry of [`crate::metrics`] in the OpenMetrics text format |
//! | `console/` | the web console (`GET /`) and the JSON API under `/api/` it is built on |
//! | `login.rs` | the login: HTTP basic against the broker's users, the very check gRPC calls make |
//! | `host.rs` | answering only requests whose `Host` names the endpoint, against DNS rebinding |
pub mod console;
pub mod health;
pub mod host;
pub mod login;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use self::console::{Console, Listening};
use self::host::Hosts;
use crate::connections::{Acceptor, Conn, Guarded, HTTP1_REQUEST_LINE, Tracked};
use crate::engine::Broker;
use crate::security::{Authenticator, Security};

/// What every HTTP handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct HttpState {
    pub broker: Arc<Broker>,
    pub console: Arc<Console>,
    /// Who may log in (the gRPC listener's own).
    pub authenticator: Arc<Authenticator>,
    /// What each user may see and do (the gRPC services' own).
    pub security: Arc<Security>,
}

impl HttpState {
    /// The state of the endpoint of `broker`, which listens where `listening` says;
    /// starts the console's sampling of rates.
    pub fn new(
        broker: Arc<Broker>,
        listening: Listening,
        authenticator: Arc<Authenticator>,
        security: Arc<Security>,
    ) -> HttpState {
        let console = Arc::new(Console::start(&broker, listening));
        HttpState {
            broker,
            console,
            authenticator,
            security,
        }
    }
}

/// Every route of the endpoint, over `state`, answering on the operator routes
/// only requests for `hosts`.
pub fn router(state: HttpState, hosts: Hosts) -> Router {
    Router::new()
        .merge(operator_routes(&state, hosts))
        .merge(health::routes())
        .with_state(state)
}

/// The routes that show or change the broker, behind the login, and before it
/// the check of `Host`.
fn operator_routes(state: &HttpState, hosts: Hosts) -> Router<HttpState> {
    Router::new()
        .merge(metrics::routes())
        .merge(console::routes(state))
        .layer(axum::middleware::from_fn_with_state(state.clone(), login::login))
        .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), host::check))
}

/// Serves `router` on the connections `acceptor` admits until `stop` fires,
/// then lets the requests under way finish. Each request knows its peer
/// ([`Peer`]), for the login's slowdown and the audit log, and counts as a
/// call of its connection until its response is done.
pub async fn serve(acceptor: Acceptor, router: Router, stop: CancellationToken) -> std::io::Result<()> {
    axum::serve(
        Connections(acceptor),
        router
            .layer(axum::middleware::from_fn(track))
            .into_make_service_with_connect_info::<Peer>(),
    )
    .with_graceful_shutdown(stop.cancelled_owned())
    .await
}

/// Who sent a request: the address, and the connection it came on.
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    conn: Arc<Conn>,
}

/// The endpoint's connections, as axum takes them.
struct Connections(Acceptor);

impl axum::serve::Listener for Connections {
    type Io = Guarded<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded<TcpStream>, SocketAddr) {
        let accepted = self.0.next().await;
        let io = Guarded::new(accepted.tcp, accepted.registration, HTTP1_REQUEST_LINE);
        (io, accepted.peer)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, Connections>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Connections>) -> Peer {
        Peer {
            addr: *stream.remote_addr(),
            conn: stream.io().registration().conn().clone(),
        }
    }
}

/// Counts the request as a call of its connection until its response is done.
async fn track(request: Request, next: Next) -> Response {
    let call = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|ConnectInfo(peer)| peer.conn.call(true));
    next.run(request)
        .await
        .map(|body| Body::new(Tracked::new(body, call)))
}
