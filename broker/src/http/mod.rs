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
//!   the web console, [`console`]). They sit behind one place, so that a layer
//!   added there (authentication) covers all of them and only them;
//! - `/health/*` stays outside it: probes carry no credentials.
//!
//! The server stops when the daemon tells it to, after the gRPC server has
//! drained (so `/health/ready` answers 503 during the drain).
pub mod console;
pub mod health;
pub mod metrics;

use std::sync::Arc;

use axum::Router;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::console::{Console, Listening};
use crate::engine::Broker;

/// What every HTTP handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct HttpState {
    pub broker: Arc<Broker>,
    pub console: Arc<Console>,
    /// What `/metrics` encodes.
    pub registry: Arc<Registry>,
}

impl HttpState {
    /// The state of the endpoint of `broker`, which listens where `listening` says;
    /// starts the console's sampling of rates.
    pub fn new(broker: Arc<Broker>, listening: Listening) -> HttpState {
        let console = Arc::new(Console::start(&broker, listening));
        let registry = Arc::new(crate::metrics::Metrics::registry(&broker));
        HttpState {
            broker,
            console,
            registry,
        }
    }
}

/// Every route of the endpoint, over `state`.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .merge(operator_routes())
        .merge(health::routes())
        .with_state(state)
}

/// The routes that show or change the broker; a layer for all of them goes here.
fn operator_routes() -> Router<HttpState> {
    Router::new().merge(metrics::routes()).merge(console::routes())
}

/// Serves `router` on `listener` until `stop` fires, then lets the requests
/// under way finish.
pub async fn serve(listener: TcpListener, router: Router, stop: CancellationToken) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
}
