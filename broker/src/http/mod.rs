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
//! Without users the endpoint obeys the rule of gRPC's listener
//! (`security::anonymous`): loopback only unless `allow-anonymous = true`.
//!
//! The server stops when the daemon tells it to, after the gRPC server has
//! drained (so `/health/ready` answers 503 during the drain).
pub mod console;
pub mod health;
pub mod login;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::console::{Console, Listening};
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

/// Every route of the endpoint, over `state`.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .merge(operator_routes(&state))
        .merge(health::routes())
        .with_state(state)
}

/// The routes that show or change the broker, behind the login.
fn operator_routes(state: &HttpState) -> Router<HttpState> {
    Router::new()
        .merge(metrics::routes())
        .merge(console::routes(state))
        .layer(axum::middleware::from_fn_with_state(state.clone(), login::login))
}

/// Serves `router` on `listener` until `stop` fires, then lets the requests
/// under way finish. Each request knows its peer (`ConnectInfo`), for the
/// login's slowdown and the audit log.
pub async fn serve(listener: TcpListener, router: Router, stop: CancellationToken) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop.cancelled_owned())
    .await
}
